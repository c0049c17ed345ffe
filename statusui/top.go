package statusui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	tea "charm.land/bubbletea/v2"

	"superfluid/status"
)

// topModel is `superfluid top`'s state: the last status, the
// connection's state and the terminal's size. View draws it.
type topModel struct {
	st            *status.Status
	note          string
	width, height int
}

// statusMsg is a status from the stream; connMsg the stream's state
// ("" once live again).
type (
	statusMsg struct{ st *status.Status }
	connMsg   struct{ note string }
)

func (m topModel) Init() tea.Cmd { return nil }

func (m topModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.KeyPressMsg:
		switch msg.String() {
		case "q", "ctrl+c", "esc":
			return m, tea.Quit
		}
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
	case statusMsg:
		m.st, m.note = msg.st, ""
	case connMsg:
		m.note = msg.note
	}
	return m, nil
}

func (m topModel) View() tea.View {
	v := tea.NewView(View(m.st, m.note, m.width, m.height))
	v.AltScreen = true
	return v
}

// Top runs the live view on the terminal in and out until the user quits
// (q, ctrl-c) or ctx ends, following c's status stream and reconnecting
// when it ends or fails.
func Top(ctx context.Context, c *status.Client, in io.Reader, out io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p := tea.NewProgram(topModel{note: "connecting to " + c.URL, width: 80, height: 24},
		tea.WithContext(ctx), tea.WithInput(in), tea.WithOutput(out))
	done := make(chan struct{})
	go func() {
		defer close(done)
		follow(ctx, c, p.Send)
	}()
	_, err := p.Run()
	cancel()
	<-done
	if errors.Is(err, tea.ErrProgramKilled) && ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return fmt.Errorf("top: %w", err)
	}
	return nil
}

// follow sends each status of the stream to the view, and the
// connection's state when the stream fails, trying again every
// status.Reconnect until ctx ends.
func follow(ctx context.Context, c *status.Client, send func(tea.Msg)) {
	for {
		live := false
		err := c.Follow(ctx, func(st *status.Status) {
			if !live {
				send(connMsg{})
				live = true
			}
			send(statusMsg{st})
		})
		if ctx.Err() != nil {
			return
		}
		var he *status.HTTPError
		note := "reconnecting: " + err.Error()
		if errors.As(err, &he) {
			note = fmt.Sprintf("reconnecting: the server answered %d: %s", he.Status, he.Message)
		}
		send(connMsg{note})
		select {
		case <-ctx.Done():
			return
		case <-time.After(status.Reconnect):
		}
	}
}
