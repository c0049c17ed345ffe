// Package statusui shows a server's live status (package status) in a
// terminal: the table of `superfluid ps` and the live view of `superfluid
// top`. What it draws is a pure function of a Status, the time and the
// terminal's size; the commands only fetch and print.
package statusui

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"superfluid/pull"
	"superfluid/status"
)

// PS is the loaded models as `ollama ps` lists them — name, digest, size,
// processor, context, until — with their lanes busy of all and the bytes
// their prefix cache holds.
func PS(st *status.Status, now time.Time) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw, "NAME\tID\tSIZE\tPROCESSOR\tCONTEXT\tUNTIL\tLANES\tCACHE")
	for _, m := range st.Models {
		lanes := "-"
		if m.Kind == "generation" {
			busy, total := st.BusyLanes(m.Name)
			lanes = fmt.Sprintf("%d/%d", busy, total)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", m.Name, shortDigest(m.Digest), pull.FormatSize(m.SizeBytes),
			"100% CPU", m.Context, Until(m.ExpiresAt, now), lanes, cacheBytes(m.Cache))
	}
	tw.Flush()
	return b.String()
}

// shortDigest is the first 12 hex digits, as ollama shows an ID.
func shortDigest(d string) string {
	d = strings.TrimPrefix(d, "sha256:")
	if d == "" {
		return "-"
	}
	return d[:min(len(d), 12)]
}

// cacheBytes is what a prefix cache holds in its three tiers.
func cacheBytes(c *status.Cache) string {
	if c == nil {
		return "-"
	}
	return pull.FormatSize(c.Resident.Bytes + c.Host.Bytes + c.Parked.Bytes)
}

// Until says when a model unloads for idleness, as ollama words it.
func Until(at *time.Time, now time.Time) string {
	if at == nil {
		return "Forever"
	}
	d := at.Sub(now)
	switch {
	case d <= 0:
		return "Stopping..."
	case d < time.Minute:
		return plural(int(d/time.Second), "second") + " from now"
	case d < time.Hour:
		return plural(int(d/time.Minute), "minute") + " from now"
	case d < 48*time.Hour:
		return plural(int(d/time.Hour), "hour") + " from now"
	}
	return plural(int(d/(24*time.Hour)), "day") + " from now"
}

func plural(n int, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return fmt.Sprintf("%d %ss", n, unit)
}
