package wire

import (
	"encoding/json"

	"superfluid/task"
)

// StopList reads "stop" as OpenAI and llama.cpp send it: a string or an
// array of strings, each checked by the core (task.CheckStops).
func StopList(raw json.RawMessage, field string) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		if err := Convert(task.CheckStops(field, []string{one}, task.MaxStops)); err != nil {
			return nil, err
		}
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, BadParam(field, "%s must be a string or an array of strings", field)
	}
	if err := Convert(task.CheckStops(field, many, task.MaxStops)); err != nil {
		return nil, err
	}
	return many, nil
}
