package media

import (
	"encoding/binary"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"superfluid/media/mediatest"
)

// mp3Frames is n MPEG-2.5 layer III frames at 8 kbit/s and 8 kHz: 72
// bytes and 72 ms each, the cheapest way to declare a long MP3.
func mp3Frames(n int) []byte {
	frame := make([]byte, 72)
	copy(frame, []byte{0xff, 0xe3, 0x18, 0xc4})
	var b []byte
	for range n {
		b = append(b, frame...)
	}
	return b
}

// flac is a FLAC stream's magic and STREAMINFO declaring total samples at
// rate (what CheckAudio reads; no frames follow).
func flac(rate, total uint64) []byte {
	b := []byte("fLaC\x00\x00\x00\x22")
	info := make([]byte, 34)
	binary.BigEndian.PutUint64(info[10:], rate<<44|1<<41|15<<36|total)
	return append(b, info...)
}

// wavWith is a 16 kHz mono 16-bit WAV whose fmt fields are changed by edit
// (offsets within the file) after it is built.
func wavWith(seconds float64, edit func(b []byte)) []byte {
	b := mediatest.SineWAV(seconds, 440, 16000)
	edit(b)
	return b
}

// The hostile-audio table: every kind of bad audio is refused by
// CheckAudio from its header alone, with a reason; good files of each
// container pass with their declared length.
func TestCheckAudio(t *testing.T) {
	wav := mediatest.SineWAV(2, 440, 16000)
	cases := []struct {
		name string
		b    []byte
		want Info
		bad  string
	}{
		{name: "wav", b: wav, want: Info{Format: "wav", Duration: 2 * time.Second}},
		{name: "stereo 8-bit wav", b: wavWith(1, func(b []byte) {
			binary.LittleEndian.PutUint16(b[22:], 2)    // channels
			binary.LittleEndian.PutUint32(b[28:], 8000) // byte rate: 4,000 frames of 2 bytes
			binary.LittleEndian.PutUint16(b[32:], 2)    // block align
			binary.LittleEndian.PutUint16(b[34:], 8)    // bits
			binary.LittleEndian.PutUint32(b[24:], 4000) // rate
		}), want: Info{Format: "wav", Duration: 4 * time.Second}},
		{name: "mp3", b: mp3Frames(100), want: Info{Format: "mp3", Duration: 7200 * time.Millisecond}},
		{name: "mp3 behind an id3 tag", b: append([]byte("ID3\x04\x00\x00\x00\x00\x00\x02\x00\x00"), mp3Frames(10)...), want: Info{Format: "mp3", Duration: 720 * time.Millisecond}},
		{name: "flac", b: flac(16000, 48000), want: Info{Format: "flac", Duration: 3 * time.Second}},
		{name: "not audio", b: []byte("hello, this is plainly text"), bad: "magic"},
		{name: "ogg", b: []byte("OggS\x00\x02\x00\x00\x00\x00\x00\x00"), bad: "Ogg"},
		{name: "m4a", b: []byte("\x00\x00\x00\x20ftypM4A \x00\x00"), bad: "MP4"},
		{name: "webm", b: []byte("\x1aE\xdf\xa3\x00\x00\x00\x00\x00\x00\x00\x00"), bad: "WebM"},
		{name: "wav header only", b: wav[:20], bad: "truncated"},
		{name: "wav cut short", b: wav[:len(wav)/2], bad: "truncated"},
		{name: "wav declaring 4 GB", b: wavWith(0.1, func(b []byte) { binary.LittleEndian.PutUint32(b[40:], 0xffffffff) }), bad: "truncated"},
		{name: "adpcm wav", b: wavWith(0.1, func(b []byte) { binary.LittleEndian.PutUint16(b[20:], 2) }), bad: "format 0x0002"},
		{name: "zero channels", b: wavWith(0.1, func(b []byte) { binary.LittleEndian.PutUint16(b[22:], 0) }), bad: "channels"},
		{name: "inconsistent byte rate", b: wavWith(0.1, func(b []byte) { binary.LittleEndian.PutUint32(b[28:], 1) }), bad: "inconsistent"},
		{name: "absurd rate", b: wavWith(0.1, func(b []byte) { binary.LittleEndian.PutUint32(b[24:], 1<<30) }), bad: "samples a second"},
		{name: "data before fmt", b: append([]byte("RIFF\x00\x00\x00\x00WAVEdata\x00\x00\x00\x00"), make([]byte, 8)...), bad: "no fmt"},
		{name: "empty wav", b: mediatest.WAV(nil, 16000, 1), bad: "no samples"},
		{name: "hours-long wav", b: mediatest.WAV(make([]int16, 31*60*1000), 1000, 1), bad: "at most 30m0s"},
		{name: "hours-long mp3", b: mp3Frames(26000), bad: "at most"},
		{name: "hours-long flac", b: flac(16000, 16000*3600), bad: "at most"},
		{name: "flac without length", b: flac(16000, 0), bad: "length"},
		{name: "flac rate 0", b: flac(0, 100), bad: "rate of 0"},
		{name: "flac truncated", b: flac(16000, 100)[:20], bad: "truncated"},
		{name: "mp3 sync, no frame", b: []byte{0xff, 0xe0, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0, 0}, bad: "no MPEG audio frame"},
		{name: "free-format mp3", b: []byte{0xff, 0xfb, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0, 0}, bad: "free-format"},
		{name: "id3 tag past the end", b: []byte("ID3\x04\x00\x00\x00\x00\x7f\x7f\x00\x00"), bad: "truncated"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			info, err := CheckAudio(c.b)
			if c.bad == "" {
				if err != nil || info != c.want {
					t.Fatalf("CheckAudio = %+v, %v; want %+v", info, err, c.want)
				}
				return
			}
			var me *Error
			if err == nil || !errors.As(err, &me) || !strings.Contains(err.Error(), c.bad) {
				t.Fatalf("CheckAudio = %+v, %v; want a refusal saying %q", info, err, c.bad)
			}
		})
	}
}

// The MP3 llama.cpp's mtmd tests with is measured by its frames.
func TestCheckAudioRealMP3(t *testing.T) {
	b, err := os.ReadFile("/work/shared/llama.cpp/tools/mtmd/test-2.mp3")
	if err != nil {
		t.Skipf("the shared llama.cpp tree's test-2.mp3 is not here: %v", err)
	}
	info, err := CheckAudio(b)
	if err != nil || info.Format != "mp3" || info.Duration < time.Second || info.Duration > time.Minute {
		t.Fatalf("test-2.mp3: %+v, %v", info, err)
	}
	t.Logf("test-2.mp3: %s", info.Duration)
}

// CheckAll tells audio from images, counts each against its own limit and
// names a bad file by kind and index.
func TestCheckAllAudio(t *testing.T) {
	wav := mediatest.SineWAV(0.5, 440, 16000)
	many := make([][]byte, MaxAudio+1)
	for i := range many {
		many[i] = wav
	}
	if _, err := CheckAll(many); err == nil || !strings.Contains(err.Error(), "audio files") {
		t.Errorf("%d audio files: %v", len(many), err)
	}
	infos, err := CheckAll([][]byte{bmp(2, 2), wav})
	if err != nil || infos[0].Format != "bmp" || infos[1].Format != "wav" || !IsAudioFormat(infos[1].Format) || IsAudioFormat("bmp") {
		t.Errorf("an image and audio: %+v, %v", infos, err)
	}
	if _, err := CheckAll([][]byte{bmp(2, 2), wav[:30]}); err == nil || !strings.HasPrefix(err.Error(), "audio 1:") {
		t.Errorf("bad audio second: %v", err)
	}
}

// CheckAudio never panics, and what it accepts is within the limits.
func FuzzCheckAudio(f *testing.F) {
	f.Add(mediatest.SineWAV(0.01, 440, 16000))
	f.Add(mp3Frames(3))
	f.Add(flac(16000, 100))
	f.Add([]byte("ID3\x04\x00\x00\x00\x00\x00\x00\xff\xfb\x90\x64"))
	f.Fuzz(func(t *testing.T, b []byte) {
		info, err := CheckAudio(b)
		if err != nil {
			return
		}
		if info.Duration <= 0 || info.Duration > MaxAudioDuration || !IsAudioFormat(info.Format) {
			t.Fatalf("accepted %+v", info)
		}
	})
}
