package session

import (
	"fmt"
	"slices"
	"strings"
)

// SetPin records a pin, replacing one of its key.
func (s *Store) SetPin(p Pin) error {
	if err := checkPin(p, s.opt.MaxPinTokens); err != nil {
		return err
	}
	return s.change(func() (*event, int64, error) {
		if !p.Expires.After(s.opt.Now()) {
			return nil, 0, fmt.Errorf("session: pin %q: %w: expires in the past", clip(p.Key), ErrInvalid)
		}
		if _, replaces := s.st.pins[p.Key]; !replaces && s.opt.MaxPins > 0 && len(s.st.pins) >= s.opt.MaxPins {
			s.dropExpired(true)
			if len(s.st.pins) >= s.opt.MaxPins {
				return nil, 0, fmt.Errorf("session: pin %q: %w: %d pins, at most %d", clip(p.Key), ErrQuota, len(s.st.pins), s.opt.MaxPins)
			}
		}
		rec := &pinRec{Key: p.Key, Model: p.Model, Tokens: slices.Clone(p.Tokens), Expires: p.Expires.UnixNano()}
		return &event{Op: opPin, Pin: rec}, pinCost(&p), nil
	}, nil)
}

// DropPin removes a pin.
func (s *Store) DropPin(key string) error {
	return s.change(func() (*event, int64, error) {
		if _, ok := s.st.pins[key]; !ok {
			return nil, 0, fmt.Errorf("session: pin %q: %w", clip(key), ErrNotFound)
		}
		return &event{Op: opUnpin, Key: key}, 0, nil
	}, nil)
}

// Pins returns the unexpired pins, by key.
func (s *Store) Pins() []Pin {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.opt.Now()
	var out []Pin
	for _, p := range s.st.pins {
		if p.Expires.After(now) {
			p.Tokens = slices.Clone(p.Tokens)
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b Pin) int { return strings.Compare(a.Key, b.Key) })
	return out
}
