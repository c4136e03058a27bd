// Package space is servetune's search space: the tunable engine launch
// settings by neutral name, their ranges, constraints, and the rendering of a
// point of the space as vLLM or SGLang flags.
package space
