package synth

import "unicode/utf8"

// Byte-level BPE (GPT-2, Qwen, StarCoder …) spells every byte as a
// printable rune so tokens are valid strings: printable Latin-1 bytes stand
// for themselves, the others (controls, space, 0x7F–0xA0, 0xAD) are moved to
// U+0100 and up in byte order. Space becomes "Ġ", newline "Ċ".
var byteToRune, runeToByte = byteLevelTables()

func byteLevelTables() ([256]rune, map[rune]byte) {
	var b2r [256]rune
	r2b := make(map[rune]byte, 256)
	next := rune(256)
	for b := 0; b < 256; b++ {
		printable := (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae
		r := rune(b)
		if !printable {
			r = next
			next++
		}
		b2r[b] = r
		r2b[r] = byte(b)
	}
	return b2r, r2b
}

// encodeBytes spells raw bytes in the byte-level alphabet.
func encodeBytes(s string) string {
	out := make([]rune, 0, len(s))
	for i := 0; i < len(s); i++ {
		out = append(out, byteToRune[s[i]])
	}
	return string(out)
}

// decodeBytes turns a byte-level token back into the bytes it stands for;
// ok is false when the token contains a rune outside the alphabet (which
// llama.cpp would render as "[UNK_BYTE_…]").
func decodeBytes(tok string) (b []byte, ok bool) {
	b = make([]byte, 0, len(tok))
	for _, r := range tok {
		c, in := runeToByte[r]
		if !in {
			return nil, false
		}
		b = append(b, c)
	}
	return b, true
}

// isPlainText reports whether b is text a user would accept as output on
// its own: valid UTF-8 with no control characters other than tab and
// newline (a lone carriage return garbles terminal output). A token failing
// this is a byte fragment (part of a multi-byte character) or a control
// byte.
func isPlainText(b []byte) bool {
	if len(b) == 0 || !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if (r < 0x20 && r != '\t' && r != '\n') || (r >= 0x7f && r < 0xa0) || r == utf8.RuneError {
			return false
		}
	}
	return true
}
