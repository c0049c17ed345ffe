package wire

import (
	"strings"
	"testing"

	"superfluid/task"
)

func TestParseLoRAEntries(t *testing.T) {
	got, err := ParseLoRAEntries([]byte(` [ {"id": 1, "scale": 0.25}, {"id": 0} ] `), "lora")
	if err != nil || len(got) != 2 || got[0] != (task.LoRAEntry{ID: 1, Scale: 0.25}) || got[1] != (task.LoRAEntry{ID: 0}) {
		t.Errorf("%+v %v", got, err)
	}
	for _, absent := range []string{"", "null", " null "} {
		if got, err := ParseLoRAEntries([]byte(absent), "lora"); got != nil || err != nil {
			t.Errorf("%q: %v %v", absent, got, err)
		}
	}
	if got, err := ParseLoRAEntries([]byte("[]"), "lora"); got == nil || len(got) != 0 || err != nil {
		t.Errorf("[]: %v %v (want an empty, non-nil list)", got, err)
	}
	many := "[" + strings.Repeat(`{"id":0},`, maxLoRAEntries) + `{"id":0}]`
	for _, bad := range []string{`{}`, `"x"`, `7`, `[7]`, `[null]`, `[{"scale":1}]`, `[{"id":"0"}]`, `[{"id":1.5}]`,
		`[{"id":1e20}]`, `[{"id":0,"scale":"1"}]`, `[{"id":0,"scale":1e999}]`, `[{"id":0,"scale":true}]`, many} {
		_, err := ParseLoRAEntries([]byte(bad), "lora")
		we, ok := err.(*Error)
		if !ok || we.Status != 400 || we.Param != "lora" {
			t.Errorf("%.40s: %v", bad, err)
		}
	}
}
