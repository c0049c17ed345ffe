// Package mediatest makes the audio files tests send: a WAV of a sine
// wave, built here so no test depends on a file on disk.
package mediatest

import (
	"encoding/binary"
	"math"
)

// SineWAV is a mono 16-bit PCM WAV of seconds of a sine at hz, sampled at
// rate, with amplitude half of full scale.
func SineWAV(seconds float64, hz float64, rate int) []byte {
	n := int(seconds * float64(rate))
	samples := make([]int16, n)
	for i := range samples {
		samples[i] = int16(16384 * math.Sin(2*math.Pi*hz*float64(i)/float64(rate)))
	}
	return WAV(samples, rate, 1)
}

// WAV wraps 16-bit PCM samples (interleaved when channels > 1) in a RIFF
// WAVE file: a fmt chunk and a data chunk.
func WAV(samples []int16, rate, channels int) []byte {
	data := make([]byte, 2*len(samples))
	for i, s := range samples {
		binary.LittleEndian.PutUint16(data[2*i:], uint16(s))
	}
	b := []byte("RIFF")
	b = binary.LittleEndian.AppendUint32(b, uint32(4+8+16+8+len(data)))
	b = append(b, "WAVEfmt "...)
	b = binary.LittleEndian.AppendUint32(b, 16)
	b = binary.LittleEndian.AppendUint16(b, 1) // PCM
	b = binary.LittleEndian.AppendUint16(b, uint16(channels))
	b = binary.LittleEndian.AppendUint32(b, uint32(rate))
	b = binary.LittleEndian.AppendUint32(b, uint32(rate*channels*2))
	b = binary.LittleEndian.AppendUint16(b, uint16(channels*2))
	b = binary.LittleEndian.AppendUint16(b, 16)
	b = append(b, "data"...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(data)))
	return append(b, data...)
}
