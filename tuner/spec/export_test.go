package spec

// OnSpecFields lets the spec reference's test see every mapping the parser
// checks.
var OnSpecFields = &onSpecFields
