package trace

import "slices"

// SharedRuns is, per request of reqs, how many of its leading hash ids
// (KV blocks) another request of reqs also starts with, and the chain
// hash (FNV-1a over the run's ids) naming that shared run; 0 and 0 for
// a request that shares no first block. The count is a sorted slice of
// every chain hash, not a map: a window holds up to MaxWindowHashIDs.
func SharedRuns(reqs []Request) (runs []int, names []uint64) {
	chain := func(q Request, f func(k int, h uint64)) {
		h := uint64(14695981039346656037) // FNV-1a's offset basis
		for k, id := range q.HashIDs {
			h = (h ^ uint64(id)) * 1099511628211 // FNV-1a's prime
			f(k+1, h)
		}
	}
	var all []uint64
	for _, q := range reqs {
		chain(q, func(_ int, h uint64) { all = append(all, h) })
	}
	slices.Sort(all)
	runs, names = make([]int, len(reqs)), make([]uint64, len(reqs))
	for i, q := range reqs {
		chain(q, func(k int, h uint64) {
			if j, ok := slices.BinarySearch(all, h); ok && j+1 < len(all) && all[j+1] == h {
				runs[i], names[i] = k, h
			}
		})
	}
	return runs, names
}
