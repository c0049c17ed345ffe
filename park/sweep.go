package park

import (
	"os"
	"path/filepath"
	"slices"
)

// sweepLocked removes the least recently used files (written or restored
// longest ago) until the directory fits the budget, keeping keep — the file
// just written — unless it alone is left. s.mu is held.
func (s *Store) sweepLocked(keep string) {
	if s.cfg.Budget <= 0 || s.diskBytes <= s.cfg.Budget {
		return
	}
	order := make([]*Meta, 0, len(s.index))
	for _, m := range s.index {
		if m.Name != keep {
			order = append(order, m)
		}
	}
	slices.SortFunc(order, func(a, b *Meta) int { return a.ModTime.Compare(b.ModTime) })
	for _, m := range order {
		if s.diskBytes <= s.cfg.Budget {
			return
		}
		s.removeLocked(m.Name)
		s.stats.Swept.Add(1)
	}
	if s.diskBytes > s.cfg.Budget && keep != "" && s.index[keep] != nil {
		s.removeLocked(keep)
		s.stats.Swept.Add(1)
	}
}

func (s *Store) removeLocked(name string) {
	os.Remove(filepath.Join(s.dir, name))
	s.dropLocked(name)
	s.gone = append(s.gone, name)
}
