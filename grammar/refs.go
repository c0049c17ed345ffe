package grammar

import (
	"net/url"
	"strconv"
	"strings"
)

// resolve finds the schema a local $ref names: "#" or a JSON pointer
// fragment "#/…" (percent-decoded, then ~1 and ~0 unescaped).
func (cv *converter) resolve(ref, path string) (any, string, error) {
	if !strings.HasPrefix(ref, "#") || (len(ref) > 1 && ref[1] != '/') {
		return nil, "", unsupported(path, "$ref", "only local JSON-pointer references (#, #/…) are supported, not %q", ref)
	}
	frag, err := url.PathUnescape(ref[1:])
	if err != nil {
		return nil, "", invalid(path, "$ref", "bad percent-encoding in %q", ref)
	}
	cur := cv.root
	if frag == "" {
		return cur, "", nil
	}
	for _, tok := range strings.Split(frag[1:], "/") {
		tok = pointerUnescape.Replace(tok)
		switch node := cur.(type) {
		case *object:
			v, ok := node.get(tok)
			if !ok {
				return nil, "", invalid(path, "$ref", "%q points nowhere", ref)
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(node) {
				return nil, "", invalid(path, "$ref", "%q points nowhere", ref)
			}
			cur = node[i]
		default:
			return nil, "", invalid(path, "$ref", "%q points nowhere", ref)
		}
	}
	return cur, frag, nil
}

// expandRef normalizes a $ref's target in place of the reference, which
// merging with siblings needs. Expanding a reference inside its own
// expansion would never end, so that is refused.
func (cv *converter) expandRef(ref, path string) (dnf, error) {
	if cv.expanding[ref] {
		return nil, unsupported(path, "$ref", "recursive reference %q combined with sibling keywords or allOf", ref)
	}
	if len(cv.expanding) >= maxExpandDepth {
		return nil, &LimitError{Limit: "depth of $refs expanded within one another (through allOf or sibling keywords)", Max: maxExpandDepth, Unit: "references", At: pathOrRoot(path)}
	}
	cv.work.spend(64 + len(ref))
	target, tpath, err := cv.resolve(ref, path)
	if err != nil {
		return nil, err
	}
	cv.expanding[ref] = true
	defer delete(cv.expanding, ref)
	return cv.normalize(target, tpath)
}

// refTarget is the normalized target of a reference kept as a rule, cached
// so each target is read once however often it is referenced.
func (cv *converter) refTarget(ref, path string) (dnf, error) {
	if d, ok := cv.refs[ref]; ok {
		return d, nil
	}
	target, tpath, err := cv.resolve(ref, path)
	if err != nil {
		return nil, err
	}
	d, err := cv.normalize(target, tpath)
	if err != nil {
		return nil, err
	}
	cv.refs[ref] = d
	return d, nil
}
