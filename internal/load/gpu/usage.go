package gpu

import (
	"github.com/servetune/servetune/internal/load/measure"
)

// Usage summarises the samples of one measured level (every GPU, in time
// order) and the output tokens the level produced: energy (each GPU's
// energy counter where it has one, else its power readings integrated
// over time), output tokens per joule, power, utilisation, memory, SM
// clock and temperature. It returns nil for no sample. It is the one
// summary of GPU samples (the report's per trial too): energy and power
// are sums over GPUs, power of each GPU's mean (measure.GPUUsage).
func Usage(samples []Sample, outputTokens int) *measure.GPUUsage {
	if len(samples) == 0 {
		return nil
	}
	byGPU := map[int][]Sample{}
	var order []int
	for _, s := range samples {
		if _, ok := byGPU[s.GPU]; !ok {
			order = append(order, s.GPU)
		}
		byGPU[s.GPU] = append(byGPU[s.GPU], s)
	}
	u := &measure.GPUUsage{GPUs: len(order), Samples: len(samples)}
	var util, memUtil, clock float64
	for _, g := range order {
		ss := byGPU[g]
		power := 0.0
		for _, s := range ss {
			power += s.PowerW
			u.PeakPowerW = max(u.PeakPowerW, s.PowerW)
			u.PeakMemUsedBytes = max(u.PeakMemUsedBytes, s.MemUsed)
			u.PeakTempC = max(u.PeakTempC, float64(s.TempC))
			util += s.UtilGPU
			memUtil += s.UtilMem
			clock += float64(s.SMClockMHz)
		}
		u.MeanPowerW += power / float64(len(ss))
		u.EnergyJ += energyOf(ss)
	}
	n := float64(len(samples))
	u.MeanUtilPct, u.MeanMemUtilPct, u.MeanSMClockMHz = util/n, memUtil/n, clock/n
	if u.EnergyJ > 0 {
		u.OutputTokensPerJoule = float64(outputTokens) / u.EnergyJ
	}
	return u
}

// energyOf is one GPU's energy over its samples: the counter's rise when
// the GPU has one, else the trapezoid integral of its power readings.
func energyOf(ss []Sample) float64 {
	if e := EnergyJoules(ss); e > 0 {
		return e
	}
	j := 0.0
	for i := 1; i < len(ss); i++ {
		dt := ss[i].Time.Sub(ss[i-1].Time).Seconds()
		if dt > 0 {
			j += dt * (ss[i].PowerW + ss[i-1].PowerW) / 2
		}
	}
	return j
}
