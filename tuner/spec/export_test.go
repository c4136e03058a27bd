package spec

// ParseSpecFields parses like ParseSpec and shows onFields every mapping
// the parser checks (the spec reference's test).
func ParseSpecFields(data []byte, file string, onFields func(field string, allowed []string)) (*Spec, error) {
	return parseSpec(data, file, onFields)
}
