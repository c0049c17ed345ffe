package pull

import (
	"fmt"
	"net/url"
	"os"
	"path"
	"strings"
)

// DefaultEndpoint is the Hugging Face Hub; HF_ENDPOINT overrides it (the
// convention of huggingface_hub, for mirrors and tests).
const DefaultEndpoint = "https://huggingface.co"

// Endpoint is $HF_ENDPOINT without a trailing slash, else DefaultEndpoint.
func Endpoint() string {
	if e := strings.TrimRight(os.Getenv("HF_ENDPOINT"), "/"); e != "" {
		return e
	}
	return DefaultEndpoint
}

// Ref is a parsed pull reference: a file of a Hugging Face repository or a
// plain URL.
type Ref struct {
	// Repo is ORG/REPO of a Hugging Face reference, empty for a plain URL.
	Repo string
	// File is the path of the file in the repository (subfolders allowed),
	// a quantization tag such as Q4_K_M (anything not ending in .gguf), or
	// empty: the repository's only GGUF file.
	File string
	// Revision is the branch, tag or commit: "main" unless a resolve URL
	// names another.
	Revision string
	// URL is a plain URL, downloaded as is.
	URL string
}

// ParseRef parses hf.co/ORG/REPO[:FILE], huggingface.co/ORG/REPO[:FILE],
// https://huggingface.co/ORG/REPO/resolve/REV/FILE or a plain http(s) URL.
func ParseRef(s string) (Ref, error) {
	s = strings.TrimSpace(s)
	bad := func(why string) (Ref, error) {
		return Ref{}, fmt.Errorf("reference %q: %s (want hf.co/ORG/REPO:FILE or an http(s) URL)", s, why)
	}
	if s == "" {
		return bad("empty")
	}
	lower := strings.ToLower(s)
	if strings.HasPrefix(lower, "http://") || strings.HasPrefix(lower, "https://") {
		u, err := url.Parse(s)
		if err != nil || u.Host == "" {
			return bad("not a URL")
		}
		if !isHFHost(u.Hostname()) {
			return Ref{URL: s}, nil
		}
		return parseHFURL(s, u)
	}
	for _, prefix := range []string{"hf.co/", "huggingface.co/"} {
		if strings.HasPrefix(lower, prefix) {
			repo, file, _ := strings.Cut(s[len(prefix):], ":")
			if !validRepo(repo) {
				return bad("the repository must be ORG/REPO")
			}
			file = strings.Trim(file, "/")
			if strings.Contains(file, "..") {
				return bad("the file name must not contain ..")
			}
			return Ref{Repo: repo, File: file, Revision: "main"}, nil
		}
	}
	return bad("unknown form")
}

func isHFHost(h string) bool {
	h = strings.ToLower(h)
	return h == "huggingface.co" || h == "hf.co" || h == "www.huggingface.co"
}

func validRepo(repo string) bool {
	org, name, ok := strings.Cut(repo, "/")
	return ok && org != "" && name != "" && !strings.Contains(name, "/") &&
		org != "." && org != ".." && name != "." && name != ".."
}

// parseHFURL reads https://huggingface.co/ORG/REPO[/resolve|blob/REV/FILE].
func parseHFURL(s string, u *url.URL) (Ref, error) {
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	switch {
	case len(parts) == 2 && validRepo(parts[0]+"/"+parts[1]):
		return Ref{Repo: parts[0] + "/" + parts[1], Revision: "main"}, nil
	case len(parts) >= 5 && (parts[2] == "resolve" || parts[2] == "blob") && validRepo(parts[0]+"/"+parts[1]):
		file := strings.Join(parts[4:], "/")
		if strings.Contains(file, "..") || parts[3] == "" {
			break
		}
		return Ref{Repo: parts[0] + "/" + parts[1], Revision: parts[3], File: file}, nil
	}
	return Ref{}, fmt.Errorf("reference %q: not a Hugging Face repository or file URL (want https://huggingface.co/ORG/REPO/resolve/REV/FILE)", s)
}

// IsHF reports whether r names a Hugging Face repository.
func (r Ref) IsHF() bool { return r.Repo != "" }

// IsTag reports whether r's File is a quantization tag rather than a file.
func (r Ref) IsTag() bool {
	return r.File != "" && !strings.HasSuffix(strings.ToLower(r.File), ".gguf")
}

// String is the canonical form: hf.co/ORG/REPO[:FILE] on the main branch,
// the resolve URL on another revision, or the plain URL.
func (r Ref) String() string {
	if !r.IsHF() {
		return r.URL
	}
	if r.Revision != "" && r.Revision != "main" && r.File != "" && !r.IsTag() {
		return DefaultEndpoint + "/" + r.Repo + "/resolve/" + r.Revision + "/" + r.File
	}
	if r.File == "" {
		return "hf.co/" + r.Repo
	}
	return "hf.co/" + r.Repo + ":" + r.File
}

// downloadURL is where a resolved Hugging Face file is fetched from.
func (r Ref) downloadURL(endpoint string) string {
	if !r.IsHF() {
		return r.URL
	}
	return endpoint + "/" + escapePath(r.Repo) + "/resolve/" + url.PathEscape(r.Revision) + "/" + escapePath(r.File)
}

func escapePath(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		parts[i] = url.PathEscape(s)
	}
	return strings.Join(parts, "/")
}

// baseName is the remote file's name, the default local name.
func (r Ref) baseName() string {
	if r.IsHF() {
		return path.Base(r.File)
	}
	u, err := url.Parse(r.URL)
	if err != nil {
		return ""
	}
	b := path.Base(u.Path)
	if b == "/" || b == "." {
		return ""
	}
	return b
}

// matches reports whether a pulled model whose canonical source is src
// answers to r: the same URL; or the same repository and revision, and
// the same file, a file containing r's tag, or any file when r names none.
func (r Ref) matches(src Ref) bool {
	if !r.IsHF() || !src.IsHF() {
		return !r.IsHF() && !src.IsHF() && r.URL == src.URL
	}
	if !strings.EqualFold(r.Repo, src.Repo) || r.Revision != src.Revision {
		return false
	}
	switch {
	case r.File == "":
		return true
	case r.IsTag():
		return strings.Contains(strings.ToLower(src.File), strings.ToLower(r.File))
	default:
		return r.File == src.File
	}
}

// pickFile chooses the GGUF file of a repository listing that r names:
// the file itself, the one file containing r's tag (case-insensitive;
// where several do, the ones where the tag stands alone between
// separators, so Q4_0 is not also Q4_0_4_4), or the only GGUF file.
func (r Ref) pickFile(files []string) (string, error) {
	var ggufs []string
	for _, f := range files {
		if strings.HasSuffix(strings.ToLower(f), ".gguf") {
			ggufs = append(ggufs, f)
		}
	}
	if len(ggufs) == 0 {
		return "", fmt.Errorf("hf.co/%s has no GGUF files", r.Repo)
	}
	if r.File == "" {
		if len(ggufs) == 1 {
			return ggufs[0], nil
		}
		return "", fmt.Errorf("hf.co/%s has %d GGUF files; name one as hf.co/%s:FILE or :QUANT (%s)", r.Repo, len(ggufs), r.Repo, strings.Join(ggufs, ", "))
	}
	tag := strings.ToLower(r.File)
	var hits, exact []string
	for _, f := range ggufs {
		lf := strings.ToLower(f)
		i := strings.Index(lf, tag)
		if i < 0 {
			continue
		}
		hits = append(hits, f)
		if standsAlone(lf, i, len(tag)) {
			exact = append(exact, f)
		}
	}
	if len(hits) > 1 && len(exact) > 0 {
		hits = exact
	}
	switch len(hits) {
	case 1:
		return hits[0], nil
	case 0:
		return "", fmt.Errorf("hf.co/%s has no GGUF file matching %q (it has %s)", r.Repo, r.File, strings.Join(ggufs, ", "))
	}
	return "", fmt.Errorf("hf.co/%s has %d GGUF files matching %q; name one as hf.co/%s:FILE (%s)", r.Repo, len(hits), r.File, r.Repo, strings.Join(hits, ", "))
}

// standsAlone reports whether s[i:i+n] has no letter, digit or underscore
// on either side.
func standsAlone(s string, i, n int) bool {
	word := func(c byte) bool {
		return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
	}
	return (i == 0 || !word(s[i-1])) && (i+n == len(s) || !word(s[i+n]))
}
