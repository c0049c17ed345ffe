package media

import (
	"bytes"
	"encoding/binary"
	"time"
)

// Audio is checked like images, from its container's header alone, before
// miniaudio (inside mtmd's helper) decodes it: the decoder sizes its output
// from the length the header declares (a WAV's data size, a FLAC's sample
// count) and allocates it at once, so a forged header is an allocation of
// any size; an MP3 declares nothing and is measured by walking its frame
// headers, which costs a few operations per frame.

// Limits on audio.
const (
	// MaxAudio is the most audio files one request carries.
	MaxAudio = 8
	// MaxAudioDuration bounds one file's declared length: 30 minutes
	// decode to 115 MB of 16 kHz float samples and 60 windows of rows.
	MaxAudioDuration = 30 * time.Minute
)

// AudioFormats are the containers mtmd's helper decodes, by name.
var AudioFormats = []string{"wav", "mp3", "flac"}

// IsAudio reports whether b is decoded as audio: the test mtmd's helper
// applies (RIFF/WAVE, an ID3 tag or an MPEG frame sync, fLaC), so a file
// this calls audio is never handed to the image decoder and the reverse.
func IsAudio(b []byte) bool {
	if len(b) < 12 {
		return false
	}
	wav := string(b[:4]) == "RIFF" && string(b[8:12]) == "WAVE"
	mp3 := string(b[:3]) == "ID3" || (b[0] == 0xff && b[1]&0xe0 == 0xe0)
	return wav || mp3 || string(b[:4]) == "fLaC"
}

// CheckAudio reads an audio file's header and refuses what the decoder
// should never see: a container it does not read, a header cut short or
// inconsistent, a length past MaxAudioDuration or of no samples. The
// returned Info has the format and Duration.
func CheckAudio(b []byte) (Info, error) {
	var (
		d   time.Duration
		err error
		f   string
	)
	switch {
	case len(b) >= 12 && string(b[:4]) == "RIFF" && string(b[8:12]) == "WAVE":
		f = "wav"
		d, err = wavDuration(b)
	case len(b) >= 4 && string(b[:4]) == "fLaC":
		f = "flac"
		d, err = flacDuration(b)
	case IsAudio(b):
		f = "mp3"
		d, err = mp3Duration(b)
	case len(b) >= 4 && string(b[:4]) == "OggS":
		return Info{}, refuse("Ogg audio (Vorbis, Opus) is not supported (send WAV, MP3 or FLAC)")
	case len(b) >= 8 && string(b[4:8]) == "ftyp":
		return Info{}, refuse("MP4/M4A audio is not supported (send WAV, MP3 or FLAC)")
	case len(b) >= 4 && string(b[:4]) == "\x1aE\xdf\xa3":
		return Info{}, refuse("WebM/Matroska audio is not supported (send WAV, MP3 or FLAC)")
	default:
		return Info{}, refuse("not a WAV, MP3 or FLAC file (unknown magic bytes)")
	}
	if err != nil {
		return Info{}, err
	}
	switch {
	case d <= 0:
		return Info{}, refuse("the %s audio holds no samples", f)
	case d > MaxAudioDuration:
		return Info{}, refuse("the %s audio is %s long: at most %s is accepted", f, d.Round(time.Second), MaxAudioDuration)
	}
	return Info{Format: f, Duration: d}, nil
}

func seconds(samples, rate uint64) time.Duration {
	if rate == 0 {
		return 0
	}
	// Whole seconds first: samples × 1e9 overflows for long files.
	return time.Duration(samples/rate)*time.Second + time.Duration((samples%rate)*uint64(time.Second)/rate)
}

// wavDuration walks a RIFF WAVE file's chunks to fmt and data: the data
// chunk must lie within the file, the format must be plain PCM or float.
func wavDuration(b []byte) (time.Duration, error) {
	var byteRate, align uint32
	var haveFmt bool
	for off := 12; ; {
		if off+8 > len(b) {
			return 0, refuse("the WAV audio is truncated (no data chunk)")
		}
		id, size := string(b[off:off+4]), binary.LittleEndian.Uint32(b[off+4:off+8])
		body := off + 8
		switch id {
		case "fmt ":
			if size < 16 || uint64(body)+uint64(size) > uint64(len(b)) {
				return 0, refuse("the WAV audio's fmt chunk is truncated")
			}
			tag := binary.LittleEndian.Uint16(b[body:])
			channels := binary.LittleEndian.Uint16(b[body+2:])
			rate := binary.LittleEndian.Uint32(b[body+4:])
			byteRate = binary.LittleEndian.Uint32(b[body+8:])
			align = uint32(binary.LittleEndian.Uint16(b[body+12:]))
			bits := binary.LittleEndian.Uint16(b[body+14:])
			if tag == 0xfffe && size >= 40 {
				tag = binary.LittleEndian.Uint16(b[body+24:]) // the extensible format's sub-format
			}
			switch tag {
			case 1, 3: // PCM, IEEE float
			default:
				return 0, refuse("WAV audio encoded as format 0x%04x is not supported (PCM or float only)", tag)
			}
			switch {
			case channels == 0 || channels > 8:
				return 0, refuse("the WAV audio declares %d channels (1 to 8 are accepted)", channels)
			case rate < 1000 || rate > 384000:
				return 0, refuse("the WAV audio declares %d samples a second (1,000 to 384,000 are accepted)", rate)
			case bits != 8 && bits != 16 && bits != 24 && bits != 32 && bits != 64:
				return 0, refuse("the WAV audio declares %d bits a sample", bits)
			case align != uint32(channels)*uint32(bits)/8 || byteRate != rate*align:
				return 0, refuse("the WAV audio's fmt chunk is inconsistent (block align %d, byte rate %d)", align, byteRate)
			}
			haveFmt = true
		case "data":
			if !haveFmt {
				return 0, refuse("the WAV audio has no fmt chunk before its data")
			}
			if uint64(body)+uint64(size) > uint64(len(b)) {
				return 0, refuse("the WAV audio is truncated: its data chunk declares %d bytes, %d follow", size, len(b)-body)
			}
			return seconds(uint64(size/align), uint64(byteRate/align)), nil
		}
		off = body + int(size) + int(size&1) // chunks are word-aligned
		if uint64(body)+uint64(size) > uint64(len(b)) {
			return 0, refuse("the WAV audio is truncated (a %q chunk runs past the end)", id)
		}
	}
}

// flacDuration reads the STREAMINFO block that must open a FLAC stream.
func flacDuration(b []byte) (time.Duration, error) {
	if len(b) < 8+34 {
		return 0, refuse("the FLAC audio is truncated (no STREAMINFO)")
	}
	if typ, size := b[4]&0x7f, uint32(b[5])<<16|uint32(b[6])<<8|uint32(b[7]); typ != 0 || size != 34 {
		return 0, refuse("the FLAC audio's first block is not a STREAMINFO of 34 bytes")
	}
	info := b[8:42]
	// 20 bits of sample rate, 3 of channels − 1, 5 of bits − 1, 36 of
	// total samples, from byte 10 of the block.
	v := binary.BigEndian.Uint64(info[10:18])
	rate := v >> 44
	total := v & (1<<36 - 1)
	if rate == 0 {
		return 0, refuse("the FLAC audio declares a sample rate of 0")
	}
	if total == 0 {
		return 0, refuse("the FLAC audio does not declare its length")
	}
	return seconds(total, rate), nil
}

// MPEG audio frame header tables: bitrates (kbit/s) by [version is MPEG-1][layer]
// and index, sample rates by version and index.
var (
	mp3Bitrates = [2][4][16]int{
		{ // MPEG-2 and 2.5
			{},
			{0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160, 0},      // layer III
			{0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160, 0},      // layer II
			{0, 32, 48, 56, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256, 0}, // layer I
		},
		{ // MPEG-1
			{},
			{0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 0},
			{0, 32, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384, 0},
			{0, 32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448, 0},
		},
	}
	mp3Rates = map[byte][3]int{3: {44100, 48000, 32000}, 2: {22050, 24000, 16000}, 0: {11025, 12000, 8000}}
)

// mp3Frame decodes the frame header at b[0:4]: the frame's length in
// bytes, its samples and sample rate; ok false when it is not one.
func mp3Frame(h []byte) (length, samples, rate int, ok bool) {
	if h[0] != 0xff || h[1]&0xe0 != 0xe0 {
		return 0, 0, 0, false
	}
	version, layer := (h[1]>>3)&3, int((h[1]>>1)&3)
	rates, known := mp3Rates[version]
	bi, ri, pad := int(h[2]>>4), int((h[2]>>2)&3), int((h[2]>>1)&1)
	if !known || layer == 0 || ri == 3 || bi == 0 || bi == 15 {
		return 0, 0, 0, false
	}
	mpeg1 := 0
	if version == 3 {
		mpeg1 = 1
	}
	bitrate := mp3Bitrates[mpeg1][layer][bi] * 1000
	rate = rates[ri]
	switch layer {
	case 3: // layer I: slots of 4 bytes
		return (12*bitrate/rate + pad) * 4, 384, rate, true
	case 2:
		return 144*bitrate/rate + pad, 1152, rate, true
	}
	if mpeg1 == 1 {
		return 144*bitrate/rate + pad, 1152, rate, true
	}
	return 72*bitrate/rate + pad, 576, rate, true
}

// mp3FreeFormat reports whether h is a valid frame header but for its
// bitrate index 0 (free format).
func mp3FreeFormat(h []byte) bool {
	version, layer, ri := (h[1]>>3)&3, (h[1]>>1)&3, (h[2]>>2)&3
	return h[0] == 0xff && h[1]&0xe0 == 0xe0 && h[2]>>4 == 0 && version != 1 && layer != 0 && ri != 3
}

// mp3Duration skips an ID3v2 tag and walks the frame headers, summing their
// samples; bytes between frames (an ID3v1 tag, junk) are skipped as a
// decoder resynchronising would. A free-format stream is refused: its
// frames' lengths are not in their headers.
func mp3Duration(b []byte) (time.Duration, error) {
	off := 0
	if bytes.HasPrefix(b, []byte("ID3")) {
		if len(b) < 10 {
			return 0, refuse("the MP3 audio is truncated (inside its ID3 tag)")
		}
		size := int(b[6]&0x7f)<<21 | int(b[7]&0x7f)<<14 | int(b[8]&0x7f)<<7 | int(b[9]&0x7f)
		off = 10 + size
		if b[5]&0x10 != 0 {
			off += 10 // a footer
		}
		if off >= len(b) {
			return 0, refuse("the MP3 audio is truncated (its ID3 tag declares %d bytes, %d follow)", size, len(b)-10)
		}
	}
	var d time.Duration
	frames := 0
	for off+4 <= len(b) {
		length, samples, rate, ok := mp3Frame(b[off : off+4])
		if !ok {
			if frames == 0 && mp3FreeFormat(b[off:off+4]) {
				return 0, refuse("free-format MP3 audio is not supported")
			}
			off++
			continue
		}
		if length < 4 {
			off++
			continue
		}
		frames++
		d += seconds(uint64(samples), uint64(rate))
		if d > MaxAudioDuration {
			break // refused by the caller; walking on costs for nothing
		}
		off += length
	}
	if frames == 0 {
		return 0, refuse("the MP3 audio has no MPEG audio frame")
	}
	return d, nil
}
