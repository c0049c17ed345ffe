package synth

import (
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"

	"superfluid/gguf"
)

// chunkValues is roughly how many weights one generation job produces:
// small enough that only a few chunks are ever in memory, large enough to
// amortise the scheduling.
const chunkValues = 1 << 16

// gen produces the random matrices of one model. Every chunk of rows has
// its own PCG stream keyed by (seed, tensor name, chunk index), so chunks
// can be generated in parallel and in any order and the file is still
// byte-identical for the same seed.
type gen struct {
	seed uint64
	typ  gguf.GGMLType
}

// matrix describes a {ne0, ne1} matrix (ne1 rows of ne0 contiguous values)
// of weights with standard deviation std, row r further multiplied by
// rowScale(r) when rowScale is not nil. The data is generated while the
// file is written.
func (g gen) matrix(name string, ne0, ne1 int, std float64, rowScale func(row int) float32) gguf.Tensor {
	return gguf.Tensor{
		Name:  name,
		Shape: []uint64{uint64(ne0), uint64(ne1)},
		Type:  g.typ,
		Produce: func(w io.Writer) error {
			return g.stream(w, name, ne0, ne1, float32(std), rowScale)
		},
	}
}

// ones is an f32 vector of ones: RMS-norm weights that leave the
// normalised activations as they are.
func ones(name string, n int) gguf.Tensor {
	v := make([]float32, n)
	for i := range v {
		v[i] = 1
	}
	b := make([]byte, 4*n)
	gguf.EncodeF32(b, v)
	return gguf.Tensor{Name: name, Shape: []uint64{uint64(n)}, Type: gguf.F32, Data: b}
}

// stream generates the matrix chunk by chunk on all cores and writes the
// encoded chunks in order. At most two chunks per core are in flight.
func (g gen) stream(w io.Writer, name string, ne0, ne1 int, std float32, rowScale func(int) float32) error {
	rows := max(1, chunkValues/ne0)
	nChunks := (ne1 + rows - 1) / rows
	workers := runtime.GOMAXPROCS(0)
	key := nameKey(name)

	results := make([]chan []byte, nChunks)
	for i := range results {
		results[i] = make(chan []byte, 1)
	}
	slots := make(chan struct{}, 2*workers)
	pool := sync.Pool{}
	go func() {
		for c := 0; c < nChunks; c++ {
			slots <- struct{}{}
			go func(c int) {
				r0 := c * rows
				r1 := min(ne1, r0+rows)
				buf, _ := pool.Get().(*[]float32)
				if buf == nil {
					buf = new([]float32)
				}
				vals := grow(*buf, (r1-r0)*ne0)
				fill(vals, rand.NewPCG(g.seed, splitmix(key+uint64(c))), std)
				if rowScale != nil {
					for r := r0; r < r1; r++ {
						if s := rowScale(r); s != 1 {
							row := vals[(r-r0)*ne0 : (r-r0+1)*ne0]
							for i := range row {
								row[i] *= s
							}
						}
					}
				}
				results[c] <- g.encode(vals)
				*buf = vals
				pool.Put(buf)
			}(c)
		}
	}()
	var err error
	for c := 0; c < nChunks; c++ {
		b := <-results[c]
		if err == nil {
			_, err = w.Write(b)
		}
		<-slots // keep draining after an error so no goroutine is left blocked
	}
	return err
}

func grow(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}

// encode converts values to the generator's tensor type.
func (g gen) encode(vals []float32) []byte {
	switch g.typ {
	case gguf.Q8_0:
		b := make([]byte, len(vals)/gguf.QK8_0*gguf.Q8_0BlockBytes)
		if err := gguf.QuantizeQ8_0(b, vals); err != nil {
			panic(err) // rows are multiples of 32: Shape.Validate guarantees it
		}
		return b
	case gguf.Q4_0:
		b := make([]byte, len(vals)/gguf.QK4_0*gguf.Q4_0BlockBytes)
		if err := gguf.QuantizeQ4_0(b, vals); err != nil {
			panic(err) // rows are multiples of 32: Shape.Validate guarantees it
		}
		return b
	case gguf.F32:
		b := make([]byte, 4*len(vals))
		gguf.EncodeF32(b, vals)
		return b
	default:
		b := make([]byte, 2*len(vals))
		gguf.EncodeF16(b, vals)
		return b
	}
}

// irwinHallStd is the standard deviation of the sum of four uniform 16-bit
// integers.
var irwinHallStd = 65536 * math.Sqrt(4.0/12)

// fill draws approximately normal values with standard deviation std: the
// sum of four uniform 16-bit numbers (Irwin–Hall, n=4) from one 64-bit PCG
// output. It is several times cheaper than exact normal sampling, which
// matters for half a billion weights, and its bounded tails (±3.5σ) suit
// weights anyway.
func fill(vals []float32, src *rand.PCG, std float32) {
	scale := std / float32(irwinHallStd)
	const mean = 4 * 65535 / 2
	for i := range vals {
		u := src.Uint64()
		s := (u & 0xffff) + (u >> 16 & 0xffff) + (u >> 32 & 0xffff) + (u >> 48)
		vals[i] = (float32(s) - mean) * scale
	}
}

// nameKey hashes a tensor name into the PCG stream selector.
func nameKey(name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return h.Sum64()
}

// splitmix scrambles a counter into a well-mixed 64-bit value (SplitMix64),
// so neighbouring chunk indices get unrelated streams.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}
