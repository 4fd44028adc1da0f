package e

// NotListed: examples are not API.
func NotListed() {}
