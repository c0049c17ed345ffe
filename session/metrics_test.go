package session

import (
	"bytes"
	"strings"
	"testing"

	"superfluid/metric"
)

func TestStatsRenderAsMetrics(t *testing.T) {
	s := open(t, t.TempDir(), Options{})
	c, _, _ := s.Create(nil, msgs("x", 2))
	s.Append(c.ID, msgs("y", 1))
	st := s.Stats()
	s.Close()
	p := metric.NewPage()
	st.AddTo(p)
	var out bytes.Buffer
	if _, err := p.WriteTo(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"superfluid_sessions_log_records_total 2\n",
		`superfluid_sessions_group_commits_total{records="1"} 2` + "\n",
		"superfluid_sessions_items 3\n",
		"superfluid_sessions_conversations 1\n",
		"superfluid_sessions_failed 0\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in\n%s", want, out.String())
		}
	}
}
