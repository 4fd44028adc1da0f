package b

// V is the package's one name.
var V int
