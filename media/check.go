package media

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"image"
	"image/gif"
	"image/jpeg"
	"image/png"
	"slices"
	"time"
)

// Limits on what a request may carry.
const (
	// MaxImages is the most images one request carries.
	MaxImages = 32
	// MaxPixels bounds one image's declared width × height (50 MP: a
	// 8192×6144 photo fits); the decoder's allocation is 3 bytes each.
	MaxPixels = 50_000_000
	// MaxSide bounds either dimension, so a 1×50M strip is refused too.
	MaxSide = 16384
)

// Info is what a media file's header declares.
type Info struct {
	Format        string // "png", "jpeg", "gif" or "bmp"; audio: "wav", "mp3" or "flac"
	Width, Height int    // an image's
	// Duration is an audio file's length.
	Duration time.Duration
}

// Error is a refused file; Reason says why in words a client can act on.
type Error struct{ Reason string }

func (e *Error) Error() string { return e.Reason }

func refuse(format string, a ...any) error { return &Error{Reason: fmt.Sprintf(format, a...)} }

// Check reads the image's header and refuses what the decoder should never
// see: an unknown or unsupported format, a file cut short, dimensions past
// MaxSide or MaxPixels. It reads no pixel data.
func Check(b []byte) (Info, error) {
	format, err := sniff(b)
	if err != nil {
		return Info{}, err
	}
	if !whole(format, b) {
		return Info{}, refuse("the %s image is truncated (no end marker)", format)
	}
	info := Info{Format: format}
	if format == "bmp" {
		info.Width, info.Height, err = bmpSize(b)
	} else {
		var cfg image.Config
		cfg, err = decodeConfig(format, b)
		info.Width, info.Height = cfg.Width, cfg.Height
	}
	if err != nil {
		return Info{}, refuse("the %s image's header does not parse: %v", format, err)
	}
	switch {
	case info.Width <= 0 || info.Height <= 0:
		return Info{}, refuse("the %s image declares %d×%d pixels", format, info.Width, info.Height)
	case info.Width > MaxSide || info.Height > MaxSide:
		return Info{}, refuse("the image is %d×%d pixels: each side may be at most %d", info.Width, info.Height, MaxSide)
	case int64(info.Width)*int64(info.Height) > MaxPixels:
		return Info{}, refuse("the image is %d×%d pixels: at most %d pixels are accepted", info.Width, info.Height, MaxPixels)
	}
	return info, nil
}

// CheckAll checks a request's media files, each an image (Check) or audio
// (CheckAudio) as IsAudio tells them apart: at most MaxImages images and
// MaxAudio audio files. The error names the file by its kind and index
// among all the files.
func CheckAll(files [][]byte) ([]Info, error) {
	audio := 0
	for _, b := range files {
		if IsAudio(b) {
			audio++
		}
	}
	if images := len(files) - audio; images > MaxImages {
		return nil, refuse("%d images: a request carries at most %d", images, MaxImages)
	}
	if audio > MaxAudio {
		return nil, refuse("%d audio files: a request carries at most %d", audio, MaxAudio)
	}
	infos := make([]Info, len(files))
	for i, b := range files {
		if IsAudio(b) {
			info, err := CheckAudio(b)
			if err != nil {
				return nil, refuse("audio %d: %v", i, err)
			}
			infos[i] = info
			continue
		}
		info, err := Check(b)
		if err != nil {
			return nil, refuse("image %d: %v", i, err)
		}
		infos[i] = info
	}
	return infos, nil
}

// IsAudioFormat reports whether an Info's Format is an audio container's.
func IsAudioFormat(format string) bool { return slices.Contains(AudioFormats, format) }

var magics = []struct {
	format string
	magic  []byte
}{
	{"png", []byte("\x89PNG\r\n\x1a\n")},
	{"jpeg", []byte{0xff, 0xd8, 0xff}},
	{"gif", []byte("GIF87a")},
	{"gif", []byte("GIF89a")},
	{"bmp", []byte("BM")},
}

// sniff names the format by its magic bytes; formats the decoder (stb_image
// as mtmd builds it) cannot read are refused by name.
func sniff(b []byte) (string, error) {
	if len(b) == 0 {
		return "", refuse("the image is empty")
	}
	for _, m := range magics {
		if bytes.HasPrefix(b, m.magic) {
			return m.format, nil
		}
	}
	if len(b) >= 12 && string(b[:4]) == "RIFF" && string(b[8:12]) == "WEBP" {
		return "", refuse("WebP images are not supported (send PNG, JPEG, GIF or BMP)")
	}
	return "", refuse("not a PNG, JPEG, GIF or BMP image (unknown magic bytes)")
}

// whole reports whether the file ends as its format's files end: a
// truncated upload is refused before the decoder reads it.
func whole(format string, b []byte) bool {
	switch format {
	case "png":
		// The last chunk is IEND: zero length, type, CRC.
		return bytes.HasSuffix(b, []byte("\x00\x00\x00\x00IEND\xaeB`\x82"))
	case "jpeg":
		// The end-of-image marker; encoders may pad after it.
		tail := b[max(0, len(b)-64):]
		return bytes.Contains(tail, []byte{0xff, 0xd9})
	case "gif":
		tail := bytes.TrimRight(b[max(0, len(b)-16):], "\x00")
		return len(tail) > 0 && tail[len(tail)-1] == 0x3b
	case "bmp":
		// The file header's size field covers the pixel array.
		return len(b) >= 14 && int64(binary.LittleEndian.Uint32(b[2:6])) <= int64(len(b))
	}
	return false
}

func decodeConfig(format string, b []byte) (image.Config, error) {
	r := bytes.NewReader(b)
	switch format {
	case "png":
		return png.DecodeConfig(r)
	case "jpeg":
		return jpeg.DecodeConfig(r)
	case "gif":
		return gif.DecodeConfig(r)
	}
	return image.Config{}, fmt.Errorf("no header reader for %s", format)
}

// bmpSize reads a BMP's BITMAPINFOHEADER (or later) width and height; a
// negative height is a top-down bitmap.
func bmpSize(b []byte) (int, int, error) {
	if len(b) < 26 {
		return 0, 0, fmt.Errorf("%d bytes: shorter than the headers", len(b))
	}
	hdr := binary.LittleEndian.Uint32(b[14:18])
	if hdr < 40 || len(b) < 14+40 {
		return 0, 0, fmt.Errorf("an info header of %d bytes (at least 40 expected)", hdr)
	}
	w := int64(int32(binary.LittleEndian.Uint32(b[18:22])))
	h := int64(int32(binary.LittleEndian.Uint32(b[22:26])))
	if h < 0 {
		h = -h
	}
	return int(w), int(h), nil
}
