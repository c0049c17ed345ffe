package media

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"strings"
	"testing"
)

func gradient(w, h int) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.RGBA{uint8(x * 9), uint8(y * 13), uint8(x ^ y), 255})
		}
	}
	return img
}

func encode(t *testing.T, f func(*bytes.Buffer) error) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := f(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// pngChunk is one PNG chunk with its CRC.
func pngChunk(typ string, data []byte) []byte {
	out := binary.BigEndian.AppendUint32(nil, uint32(len(data)))
	out = append(out, typ...)
	out = append(out, data...)
	return binary.BigEndian.AppendUint32(out, crc32.ChecksumIEEE(append([]byte(typ), data...)))
}

// declaredPNG is a well-formed PNG header declaring w×h pixels, with a
// tiny IDAT and IEND: what a decompression bomb looks like before decoding
// (a few hundred bytes that inflate to w×h×3).
func declaredPNG(w, h uint32) []byte {
	ihdr := binary.BigEndian.AppendUint32(nil, w)
	ihdr = binary.BigEndian.AppendUint32(ihdr, h)
	ihdr = append(ihdr, 8, 2, 0, 0, 0) // 8-bit RGB
	out := []byte("\x89PNG\r\n\x1a\n")
	out = append(out, pngChunk("IHDR", ihdr)...)
	out = append(out, pngChunk("IDAT", []byte{0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01})...)
	return append(out, pngChunk("IEND", nil)...)
}

// bmp is a 24-bit w×h bitmap (rows padded to 4 bytes).
func bmp(w, h int32) []byte {
	row := (int(w)*3 + 3) &^ 3
	size := 14 + 40 + row*int(max(h, -h))
	b := make([]byte, size)
	copy(b, "BM")
	binary.LittleEndian.PutUint32(b[2:], uint32(size))
	binary.LittleEndian.PutUint32(b[10:], 54)
	binary.LittleEndian.PutUint32(b[14:], 40)
	binary.LittleEndian.PutUint32(b[18:], uint32(w))
	binary.LittleEndian.PutUint32(b[22:], uint32(h))
	binary.LittleEndian.PutUint16(b[26:], 1)
	binary.LittleEndian.PutUint16(b[28:], 24)
	return b
}

// The hostile-image table: every kind of bad image is refused by Check
// from its header alone, with a reason; good images of each format pass
// with their declared size.
func TestCheck(t *testing.T) {
	img := gradient(40, 30)
	pngB := encode(t, func(b *bytes.Buffer) error { return png.Encode(b, img) })
	jpgB := encode(t, func(b *bytes.Buffer) error { return jpeg.Encode(b, img, nil) })
	gifB := encode(t, func(b *bytes.Buffer) error { return gif.Encode(b, img, nil) })
	cases := []struct {
		name string
		b    []byte
		want Info   // for a good image
		bad  string // a word the refusal says
	}{
		{name: "png", b: pngB, want: Info{Format: "png", Width: 40, Height: 30}},
		{name: "jpeg", b: jpgB, want: Info{Format: "jpeg", Width: 40, Height: 30}},
		{name: "gif", b: gifB, want: Info{Format: "gif", Width: 40, Height: 30}},
		{name: "bmp", b: bmp(7, 5), want: Info{Format: "bmp", Width: 7, Height: 5}},
		{name: "top-down bmp", b: bmp(7, -5), want: Info{Format: "bmp", Width: 7, Height: 5}},
		{name: "empty", b: nil, bad: "empty"},
		{name: "not an image", b: []byte("{\"hello\": \"world\"} and then some more text"), bad: "magic"},
		{name: "pdf", b: []byte("%PDF-1.7\n..."), bad: "magic"},
		{name: "webp", b: []byte("RIFF\x24\x00\x00\x00WEBPVP8 "), bad: "WebP"},
		{name: "truncated png", b: pngB[:len(pngB)/2], bad: "truncated"},
		{name: "truncated jpeg", b: jpgB[:len(jpgB)/2], bad: "truncated"},
		{name: "truncated gif", b: gifB[:len(gifB)-1], bad: "truncated"},
		{name: "truncated bmp", b: bmp(7, 5)[:60], bad: "truncated"},
		{name: "png magic only", b: append([]byte("\x89PNG\r\n\x1a\n"), pngChunk("IEND", nil)...), bad: "header"},
		{name: "huge dimensions", b: declaredPNG(100000, 100000), bad: "each side"},
		{name: "decompression bomb", b: declaredPNG(8000, 8000), bad: "pixels"},
		{name: "strip", b: declaredPNG(1, 40000), bad: "each side"},
		{name: "zero width", b: bmp(0, 5), bad: "declares"},
		{name: "largest accepted", b: declaredPNG(10000, 5000), want: Info{Format: "png", Width: 10000, Height: 5000}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			info, err := Check(c.b)
			if c.bad == "" {
				if err != nil || info != c.want {
					t.Fatalf("Check = %+v, %v; want %+v", info, err, c.want)
				}
				return
			}
			var me *Error
			if err == nil || !errors.As(err, &me) || !strings.Contains(err.Error(), c.bad) {
				t.Fatalf("Check = %+v, %v; want a refusal saying %q", info, err, c.bad)
			}
		})
	}
}

func TestCheckAll(t *testing.T) {
	good := bmp(2, 2)
	if _, err := CheckAll(make([][]byte, MaxImages)); err == nil || !strings.Contains(err.Error(), "image 0") {
		t.Errorf("empty images: %v", err)
	}
	many := make([][]byte, MaxImages+1)
	for i := range many {
		many[i] = good
	}
	if _, err := CheckAll(many); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Errorf("%d images: %v", len(many), err)
	}
	infos, err := CheckAll(many[:MaxImages])
	if err != nil || len(infos) != MaxImages {
		t.Errorf("%d images: %v", MaxImages, err)
	}
	if _, err := CheckAll([][]byte{good, []byte("nope")}); err == nil || !strings.HasPrefix(err.Error(), "image 1:") {
		t.Errorf("second image bad: %v", err)
	}
}

func TestDataURL(t *testing.T) {
	raw := bmp(3, 3)
	enc := base64.StdEncoding.EncodeToString(raw)
	cases := []struct {
		name, url string
		max       int
		bad       string
	}{
		{name: "png data url", url: "data:image/png;base64," + enc, max: 1 << 20},
		{name: "no mime", url: "data:;base64," + enc, max: 1 << 20},
		{name: "url alphabet unpadded", url: "data:image/bmp;base64," + base64.RawURLEncoding.EncodeToString(raw), max: 1 << 20},
		{name: "remote", url: "https://example.com/cat.png", max: 1 << 20, bad: "not a data URL"},
		{name: "not base64", url: "data:image/png," + enc, max: 1 << 20, bad: "not base64"},
		{name: "no comma", url: "data:image/png;base64", max: 1 << 20, bad: "comma"},
		{name: "not an image type", url: "data:text/html;base64," + enc, max: 1 << 20, bad: "not an image"},
		{name: "bad base64", url: "data:image/png;base64,!!!!", max: 1 << 20, bad: "valid base64"},
		{name: "over the limit", url: "data:image/png;base64," + enc, max: len(raw) - 1, bad: "limit"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, data, err := ParseDataURL(c.url, c.max)
			if c.bad == "" {
				if err != nil || !bytes.Equal(data, raw) {
					t.Fatalf("ParseDataURL: %v (%d bytes)", err, len(data))
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.bad) {
				t.Fatalf("ParseDataURL: %v; want a refusal saying %q", err, c.bad)
			}
		})
	}
	if CheckURL("HTTPS://x/y.png") != nil || CheckURL("data:image/png;base64,") == nil || CheckURL("file:///etc/passwd") == nil {
		t.Error("CheckURL: an http(s) URL with a host, and nothing else")
	}
}

// Check never panics, and what it accepts is within the limits.
func FuzzCheck(f *testing.F) {
	f.Add(declaredPNG(10, 10))
	f.Add(bmp(3, -3))
	f.Add([]byte("GIF89a\x01\x00\x01\x00;"))
	f.Add([]byte{0xff, 0xd8, 0xff, 0xc0, 0xff, 0xd9})
	f.Fuzz(func(t *testing.T, b []byte) {
		info, err := Check(b)
		if err != nil {
			return
		}
		if info.Width <= 0 || info.Height <= 0 || info.Width > MaxSide || info.Height > MaxSide ||
			int64(info.Width)*int64(info.Height) > MaxPixels {
			t.Fatalf("accepted %+v", info)
		}
	})
}
