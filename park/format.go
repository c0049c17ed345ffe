package park

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strings"

	"superfluid/engine"
)

// The on-disk layout, little-endian throughout:
//
//	off  size  field
//	  0     4  magic "SFPK"
//	  4     2  format version (3)
//	  6     1  codec (1: zstd)
//	  7     1  flags (bit 0: lossy 8-bit demotion, bit 1: 2-byte shuffle)
//	  8     1  zstd encoder level (klauspost EncoderLevel)
//	  9     1  V cache layout (VLayout: 1 rows, 2 transposed)
//	 10     2  checkpoint count k (version 3; zero before)
//	 12     4  token count n
//	 16    32  model identity (engine.Descriptor.Identity, decoded)
//	 48     8  K cache type (and V's, unless bytes 108-115 say), ASCII, NUL-padded
//	 56    32  sha256 of the token list (n little-endian int32)
//	 88     8  raw length: the exported blob's size once decoded
//	 96     8  payload length: the compressed bytes after the header
//	104     4  CRC-32C of the payload
//	108     8  V cache type when it is not K's, ASCII, NUL-padded; else zero
//	116    12  LoRA adapter set (engine.AdapterSetID); zero: the base model
//	128    4n  the token list
//	128+4n 32k the checkpoint table, one record per checkpoint:
//	            kind (1: partial state) u8, flags u8 (shuffle only), 2 zero,
//	            position u32 (tokens the state covers, ascending, in [1, n]),
//	            raw length u64, payload length u64, CRC-32C u32, 4 zero
//	H = 128+4n+32k
//	  H     4  CRC-32C of bytes [0, H)
//	H+4     …  payload, then each checkpoint's payload in table order
//
// Checkpoints (version 3) are the seeds' extra state spaces: the partial
// state (sliding-window cells, recurrent state) at positions inside the
// stream, so that a prompt leaving the parked stream there resumes
// without the cut the state cannot take (kv/partial.go). Each is
// compressed alone (zstd, shuffled like the main payload), never demoted.
//
// The header checksum makes any damaged header byte (a token, a length, the
// identity) a refusal at start-up without reading the payload; the payload
// checksum catches damage to the rest at restore. CRC-32C rather than a
// cryptographic hash: it detects every burst of up to 32 flipped bits,
// runs at memory speed (SSE4.2), and the threat is damage, not forgery —
// the directory is the user's own.
//
// The V cache type is written only when it differs from K's, so a cache of
// one type writes what builds before the two could differ wrote and read
// (those refuse a file with it set as from a newer build).
//
// The adapter set is a stream computed under LoRA adapters (sched/lora.go
// keys such a stream in its set's namespace): zero for the base model, as
// every file before it had, and builds before it refuse a file with it set
// as from a newer build — they would key its tokens in a namespace of
// their own numbering. A file is restored only for the set it names.
//
// Version 1 had no V layout (byte 9 was zero): such a file may hold
// either layout, so it is read only to migrate it (migrate.go), which
// learns the layout from the payload's first bytes. Version 2 had no
// checkpoints (bytes 10-11 zero): read as a version 3 file without any.
const (
	magic            = "SFPK"
	formatVersion    = 3
	spacelessVersion = 2
	legacyVersion    = 1
	spaceLen         = 32
	spaceCheckpoint  = 1
	// MaxCheckpoints bounds the table a header may declare.
	MaxCheckpoints = 256
	codecZstd      = 1
	fixedLen       = 128
	// MaxTokens bounds the token count a header may declare, so that a
	// damaged count cannot make the reader allocate gigabytes.
	MaxTokens = 1 << 22
	// maxRaw bounds the decoded size for the same reason (64 GiB).
	maxRaw = 1 << 36
)

// Encoding flags.
const (
	FlagLossy   = 1 << 0 // f16 KV data demoted to 8 bits: outputs may differ
	FlagShuffle = 1 << 1 // 2-byte planes split before compression
	knownFlags  = FlagLossy | FlagShuffle
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Header is a park file's header.
type Header struct {
	Version     uint16 // formatVersion, or legacyVersion read for migration
	Flags       uint8
	Level       uint8
	VLayout     VLayout // none in a legacy header
	Model       [32]byte
	KVType      string // the K cache's type
	VType       string // the V cache's type, when not KVType
	Tokens      []engine.Token
	TokenDigest [32]byte
	RawLen      uint64
	PayloadLen  uint64
	PayloadCRC  uint32
	Checkpoints []Space
	// Set is the LoRA adapter set the state was computed under.
	Set engine.AdapterSetID
}

// Space is a checkpoint's record in the header.
type Space struct {
	Pos        uint32
	Flags      uint8
	RawLen     uint64
	PayloadLen uint64
	PayloadCRC uint32
}

// Len is the header's size on disk.
func (h *Header) Len() int64 { return headerLen(len(h.Tokens), len(h.Checkpoints)) }

// checkpointPositions are the positions of h's checkpoints.
func (h *Header) checkpointPositions() []int {
	var out []int
	for _, sp := range h.Checkpoints {
		out = append(out, int(sp.Pos))
	}
	return out
}

// spacesLen is the bytes of payload the checkpoints take after the main one.
func (h *Header) spacesLen() uint64 {
	var n uint64
	for _, sp := range h.Checkpoints {
		n += sp.PayloadLen
	}
	return n
}

func headerLen(n, k int) int64 { return fixedLen + 4*int64(n) + spaceLen*int64(k) + 4 }

// CacheTypes names the K and V cache types as Config.CacheTypes does.
func (h *Header) CacheTypes() string {
	c := Config{KVType: h.KVType, VType: h.VType}
	return c.CacheTypes()
}

// Lossy reports whether the payload was demoted.
func (h *Header) Lossy() bool { return h.Flags&FlagLossy != 0 }

// appendHeader encodes h in the current format, computing the token
// digest, after dst.
func appendHeader(dst []byte, h *Header) []byte {
	start := len(dst)
	var fixed [fixedLen]byte
	copy(fixed[0:4], magic)
	binary.LittleEndian.PutUint16(fixed[4:], formatVersion)
	fixed[6] = codecZstd
	fixed[7] = h.Flags
	fixed[8] = h.Level
	fixed[9] = byte(h.VLayout)
	binary.LittleEndian.PutUint16(fixed[10:], uint16(len(h.Checkpoints)))
	binary.LittleEndian.PutUint32(fixed[12:], uint32(len(h.Tokens)))
	copy(fixed[16:48], h.Model[:])
	copy(fixed[48:56], h.KVType)
	if h.VType != h.KVType {
		copy(fixed[108:116], h.VType)
	}
	copy(fixed[116:128], h.Set[:])
	h.TokenDigest = TokenDigest(h.Tokens)
	copy(fixed[56:88], h.TokenDigest[:])
	binary.LittleEndian.PutUint64(fixed[88:], h.RawLen)
	binary.LittleEndian.PutUint64(fixed[96:], h.PayloadLen)
	binary.LittleEndian.PutUint32(fixed[104:], h.PayloadCRC)
	dst = append(dst, fixed[:]...)
	dst = appendTokens(dst, h.Tokens)
	for _, sp := range h.Checkpoints {
		var rec [spaceLen]byte
		rec[0] = spaceCheckpoint
		rec[1] = sp.Flags
		binary.LittleEndian.PutUint32(rec[4:], sp.Pos)
		binary.LittleEndian.PutUint64(rec[8:], sp.RawLen)
		binary.LittleEndian.PutUint64(rec[16:], sp.PayloadLen)
		binary.LittleEndian.PutUint32(rec[24:], sp.PayloadCRC)
		dst = append(dst, rec[:]...)
	}
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

func appendTokens(dst []byte, toks []engine.Token) []byte {
	for _, t := range toks {
		dst = binary.LittleEndian.AppendUint32(dst, uint32(t))
	}
	return dst
}

// TokenDigest is the sha256 of a token list, as files are named by.
func TokenDigest(toks []engine.Token) [32]byte {
	h := sha256.New()
	var buf [4096]byte
	for len(toks) > 0 {
		n := min(len(toks), len(buf)/4)
		b := appendTokens(buf[:0], toks[:n])
		h.Write(b)
		toks = toks[n:]
	}
	var d [32]byte
	h.Sum(d[:0])
	return d
}

// Name is the file name of the park file covering toks.
func Name(toks []engine.Token) string {
	d := TokenDigest(toks)
	return hex.EncodeToString(d[:]) + ".park"
}

// isName reports whether base is a park file's name: 64 hex digits, ".park".
func isName(base string) bool {
	stem, ok := strings.CutSuffix(base, ".park")
	if !ok || len(stem) != 64 {
		return false
	}
	_, err := hex.DecodeString(stem)
	return err == nil && strings.ToLower(stem) == stem
}

// readHeader reads and checks a header from r, which holds size bytes in
// all. It checks everything the header alone can tell: format, header
// checksum, token digest, and that the payload length accounts for exactly
// the rest of the file. Identity and KV type are the caller's to compare.
func readHeader(r io.Reader, size int64) (*Header, error) {
	var fixed [fixedLen]byte
	if size < fixedLen+4 {
		return nil, refuse(ReasonTruncated, "%d bytes are too few for a header", size)
	}
	if _, err := io.ReadFull(r, fixed[:]); err != nil {
		return nil, refuse(ReasonTruncated, "reading the header: %v", err)
	}
	if string(fixed[0:4]) != magic {
		return nil, refuseForeign(ReasonFormat, "not a park file (magic %q)", fixed[0:4])
	}
	version := binary.LittleEndian.Uint16(fixed[4:])
	if version != formatVersion && version != spacelessVersion && version != legacyVersion {
		return nil, refuseForeign(ReasonFormat, "format version %d, this build reads %d and %d", version, formatVersion, spacelessVersion)
	}
	n := binary.LittleEndian.Uint32(fixed[12:])
	if n == 0 || n > MaxTokens {
		return nil, refuse(ReasonHeader, "token count %d outside [1, %d]", n, MaxTokens)
	}
	k := 0
	if version == formatVersion {
		k = int(binary.LittleEndian.Uint16(fixed[10:]))
	}
	if k > MaxCheckpoints {
		return nil, refuse(ReasonHeader, "%d checkpoints, at most %d", k, MaxCheckpoints)
	}
	hl := headerLen(int(n), k)
	if size < hl {
		return nil, refuse(ReasonTruncated, "a %d-token header needs %d bytes, the file has %d", n, hl, size)
	}
	rest := make([]byte, hl-fixedLen)
	if _, err := io.ReadFull(r, rest); err != nil {
		return nil, refuse(ReasonTruncated, "reading the token list: %v", err)
	}
	sum := crc32.Update(crc32.Checksum(fixed[:], castagnoli), castagnoli, rest[:len(rest)-4])
	if sum != binary.LittleEndian.Uint32(rest[len(rest)-4:]) {
		return nil, refuse(ReasonHeader, "header checksum mismatch")
	}
	// Checked after the checksum: a damaged byte is a header refusal, while
	// a well-formed header with these set is a file from a newer build.
	if fixed[6] != codecZstd || fixed[7]&^knownFlags != 0 || fixed[7] == knownFlags || (version != formatVersion && (!allZero(fixed[10:12]) || !allZero(fixed[116:128]))) {
		return nil, refuseForeign(ReasonFormat, "unknown codec %d or flags %#x (lossy and shuffled never go together)", fixed[6], fixed[7])
	}
	layout := VLayout(fixed[9])
	if (version != legacyVersion) != layout.valid() || (version == legacyVersion && layout != 0) {
		return nil, refuseForeign(ReasonFormat, "format version %d with V layout byte %d", version, fixed[9])
	}
	h := &Header{Version: version, Flags: fixed[7], Level: fixed[8], VLayout: layout}
	copy(h.Model[:], fixed[16:48])
	h.KVType = strings.TrimRight(string(fixed[48:56]), "\x00")
	h.VType = strings.TrimRight(string(fixed[108:116]), "\x00")
	copy(h.Set[:], fixed[116:128])
	copy(h.TokenDigest[:], fixed[56:88])
	h.RawLen = binary.LittleEndian.Uint64(fixed[88:])
	h.PayloadLen = binary.LittleEndian.Uint64(fixed[96:])
	h.PayloadCRC = binary.LittleEndian.Uint32(fixed[104:])
	h.Tokens = make([]engine.Token, n)
	for i := range h.Tokens {
		h.Tokens[i] = engine.Token(binary.LittleEndian.Uint32(rest[4*i:]))
	}
	if TokenDigest(h.Tokens) != h.TokenDigest {
		return nil, refuse(ReasonTokens, "the token list does not match its digest")
	}
	if h.RawLen == 0 || h.RawLen > maxRaw {
		return nil, refuse(ReasonHeader, "raw length %d", h.RawLen)
	}
	if err := readSpaces(h, rest[4*int(n):len(rest)-4]); err != nil {
		return nil, err
	}
	body := h.PayloadLen + h.spacesLen()
	if h.PayloadLen > uint64(size-hl) || h.spacesLen() > uint64(size-hl) || body > uint64(size-hl) {
		return nil, refuse(ReasonTruncated, "payloads of %d bytes, %d present", body, size-hl)
	}
	if body < uint64(size-hl) {
		return nil, refuse(ReasonTruncated, "%d bytes after %d bytes of payload", uint64(size-hl)-body, body)
	}
	return h, nil
}

// readSpaces reads the checkpoint table into h, refusing a record that
// names an unknown kind or flag, a position outside the stream or out of
// order, or a length no state has.
func readSpaces(h *Header, table []byte) error {
	last := uint32(0)
	for i := 0; i+spaceLen <= len(table); i += spaceLen {
		rec := table[i : i+spaceLen]
		sp := Space{
			Pos: binary.LittleEndian.Uint32(rec[4:]), Flags: rec[1],
			RawLen: binary.LittleEndian.Uint64(rec[8:]), PayloadLen: binary.LittleEndian.Uint64(rec[16:]),
			PayloadCRC: binary.LittleEndian.Uint32(rec[24:]),
		}
		switch {
		case rec[0] != spaceCheckpoint || sp.Flags&^FlagShuffle != 0 || !allZero(rec[2:4]) || !allZero(rec[28:32]):
			return refuseForeign(ReasonFormat, "checkpoint %d: unknown kind %d or flags %#x", i/spaceLen, rec[0], sp.Flags)
		case sp.Pos <= last || sp.Pos > uint32(len(h.Tokens)):
			return refuse(ReasonHeader, "checkpoint %d at %d: positions ascend within [1, %d]", i/spaceLen, sp.Pos, len(h.Tokens))
		case sp.RawLen == 0 || sp.RawLen > maxRaw || sp.PayloadLen > maxRaw:
			return refuse(ReasonHeader, "checkpoint %d: raw length %d, payload %d", i/spaceLen, sp.RawLen, sp.PayloadLen)
		}
		last = sp.Pos
		h.Checkpoints = append(h.Checkpoints, sp)
	}
	return nil
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// Reason says why a park file was refused.
type Reason int

// Refusal reasons. Each is counted separately (Stats.Refused).
const (
	ReasonFormat    Reason = iota // not a park file, or an unknown version/codec/flag
	ReasonHeader                  // the header checksum or a header field is wrong
	ReasonModel                   // written for another model
	ReasonKVType                  // written from another KV cache type
	ReasonTokens                  // token list, digest and file name disagree
	ReasonTruncated               // shorter (or longer) than its header says
	ReasonPayload                 // payload checksum mismatch
	ReasonDecode                  // the payload does not decompress to the raw length
	ReasonVLayout                 // written from a cache of the other V layout
	ReasonAdapters                // computed under another LoRA adapter set
	NumReasons
)

var reasonNames = [NumReasons]string{"format", "header", "model", "kv_type", "tokens", "truncated", "payload", "decode", "v_layout", "lora"}

func (r Reason) String() string {
	if r >= 0 && r < NumReasons {
		return reasonNames[r]
	}
	return fmt.Sprintf("reason %d", int(r))
}

// RefusedError is a park file that failed verification.
type RefusedError struct {
	Reason Reason
	Msg    string
	// Foreign: the file is sound but not this store's to read — another
	// build's format, another model identity's. Such a file is left
	// alone for whoever can read it; a damaged one is removed.
	Foreign bool
}

func (e *RefusedError) Error() string { return "park: refused (" + e.Reason.String() + "): " + e.Msg }

// ErrRefused matches any *RefusedError with errors.Is.
var ErrRefused = errors.New("park: refused")

// Is makes errors.Is(err, ErrRefused) hold for every refusal.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

func refuse(r Reason, format string, args ...any) error {
	return &RefusedError{Reason: r, Msg: fmt.Sprintf(format, args...)}
}

func refuseForeign(r Reason, format string, args ...any) error {
	return &RefusedError{Reason: r, Msg: fmt.Sprintf(format, args...), Foreign: true}
}

// foreign reports whether err refuses a sound file of another build or
// identity.
func foreign(err error) bool {
	var re *RefusedError
	return errors.As(err, &re) && re.Foreign
}

// ReasonOf returns the refusal reason in err, if any.
func ReasonOf(err error) (Reason, bool) {
	var re *RefusedError
	if errors.As(err, &re) {
		return re.Reason, true
	}
	return 0, false
}
