package grammar

// object emits objects with the declared properties in schema order
// (required ones mandatory, the others optional), then any further
// properties additionalProperties admits, under keys none of the declared
// names. rest[i] is "properties i… given that one was already written"
// (so it starts with a comma) and first[i] the same before any was written:
// 2n small rules, however many properties are optional.
func (e *emitter) object(c *conj) (string, bool, error) {
	declares := len(c.props) > 0 || len(c.required) > 0
	if !c.objectConstrained() || !declares && c.additional != nil && c.additional.isTrue() {
		return e.base("object"), true, nil
	}
	ws := e.base("ws")
	type member struct {
		kv       string
		required bool
	}
	var members []member
	var names []string
	isRequired := map[string]bool{}
	for _, r := range c.required {
		isRequired[r] = true
	}
	addMember := func(name string, d dnf) (bool, error) {
		names = append(names, name)
		v, ok, err := e.valueRule(d, c.path+"-"+name)
		if err != nil || !ok {
			return !isRequired[name], err // an impossible property is fine only when optional
		}
		key := lit(`"` + jsonStringBody(name) + `"`)
		kv := e.rule(c.path+"-"+name+"-kv", seq(key, ws, `":"`, ws, v, ws))
		members = append(members, member{kv: kv, required: isRequired[name]})
		return true, nil
	}
	for _, p := range c.props {
		if ok, err := addMember(p.name, p.schema); err != nil || !ok {
			return "", false, err
		}
	}
	extra := c.additional
	if extra == nil && e.cv.opts.Strict && declares {
		extra = &dnf{}
	}
	for _, r := range c.required {
		if _, declared := c.propSchema(r); declared {
			continue
		}
		d := trueDNF(c.path)
		if c.additional != nil {
			d = *c.additional
		}
		if ok, err := addMember(r, d); err != nil || !ok {
			return "", false, err
		}
	}
	tail0, tail1 := `""`, `""`
	if extra == nil || len(*extra) > 0 {
		v := e.base("value")
		if extra != nil {
			x, _, err := e.valueRule(*extra, c.path+"-extra")
			if err != nil {
				return "", false, err
			}
			v = x
		}
		kv := e.rule(c.path+"-extra-kv", seq(e.keyExcluding(names, c.path), ws, `":"`, ws, v, ws))
		tail1 = e.rule(c.path+"-extras", `( "," `+ws+" "+kv+" )*")
		tail0 = "( " + kv + " " + tail1 + " )?"
	}
	first, rest := tail0, tail1
	for i := len(members) - 1; i >= 0; i-- {
		m := members[i]
		restBody := seq(`","`, ws, m.kv, rest)
		firstBody := seq(m.kv, rest)
		if !m.required {
			restBody = "( " + restBody + " | " + rest + " )"
			firstBody = "( " + firstBody + " | " + first + " )"
		}
		first = e.rule(c.path+"-first", firstBody)
		rest = e.rule(c.path+"-rest", restBody)
	}
	return seq(`"{"`, ws, first, `"}"`), true, nil
}
