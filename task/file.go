package task

import (
	"os"
	"time"
)

// FileFacts are the size and time of m's file, as model listings report
// them; a model with no file on disk reports the weights' size.
func (m *Model) FileFacts() (size int64, modified time.Time) {
	if st, err := os.Stat(m.Path); err == nil {
		size, modified = st.Size(), st.ModTime()
	}
	if size == 0 {
		size = int64(m.Desc.ModelBytes)
	}
	return size, modified
}
