// Package media checks the images and audio a request carries before
// anything costs:
// an image is decoded (stb_image, in llama.cpp's mtmd) and encoded (the
// projector's graph) only after its bytes have passed Check here — a known
// format by its magic bytes, whole (its format's end marker present), and
// at most MaxPixels by the width and height its header declares, which also
// bounds a decompression bomb (the decoder allocates width × height × 3
// bytes whatever the file's size). Requests carry at most MaxImages. Audio
// (audio.go: WAV, MP3, FLAC, decoded by miniaudio in mtmd's helper) is
// held to MaxAudioDuration by the length its header declares, or an MP3's
// frame headers; requests carry at most MaxAudio files. It also decodes
// the shapes APIs send media in: data URLs and base64.
//
// It imports nothing of the engine, so every API's request parsing can use
// it, and the refusals come before a request reaches the scheduler.
package media
