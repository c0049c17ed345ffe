package reply

import (
	"strings"

	"superfluid/chat"
)

// probeThink reads reasoning markers no table knows off the probe: out is
// a turn rendered with reasoning and content. The text between the two is
// the closing marker; the opening one is what the template writes before
// the reasoning, or, when it writes nothing there, what its generation
// prompt ends with (Apriel 1.6's "Here are my reasoning steps:", closed by
// "[BEGIN FINAL RESPONSE]").
func probeThink(t *chat.Template, out string) *thinkMarkers {
	i, j := strings.Index(out, probeThought), strings.Index(out, probeAnswer)
	if i < 0 || j < i {
		return nil
	}
	close := strings.TrimSpace(out[i+len(probeThought) : j])
	if !plausibleMarker(close) {
		return nil
	}
	user := []chat.Message{{Role: chat.RoleUser, Content: probeQuestion}}
	plain, err := t.Exact(chat.Request{Messages: append(user, chat.Message{Role: chat.RoleAssistant, Content: probeAnswer})})
	if err != nil {
		return nil
	}
	// Before the reasoning: what the turn without it does not write.
	// (The probe words share "Probe", so the common prefix may run on.)
	start := min(commonPrefix(plain, out), i)
	for start > 0 && !strings.ContainsRune(" \t\r\n>", rune(out[start-1])) {
		start-- // back to the start of the word the turns part in
	}
	open := strings.TrimSpace(out[start:i])
	if open == "" {
		gen, err := t.Exact(chat.Request{Messages: user, AddGenerationPrompt: true})
		if err != nil {
			return nil
		}
		open = strings.TrimSpace(gen[min(commonPrefix(gen, out), i, len(gen)):])
	}
	if !plausibleMarker(open) || open == close {
		return nil
	}
	return &thinkMarkers{open: open, close: close}
}

// plausibleMarker: one line, short, no probe text.
func plausibleMarker(s string) bool {
	return s != "" && len(s) <= 64 && !strings.ContainsAny(s, "\n") &&
		!strings.Contains(s, "Probe")
}
