package measure

// Status is how a trial stands or ended. The values are stored.
type Status string

// Trial statuses.
const (
	StatusRunning     Status = "running"     // started, not finished (or its process died)
	StatusOK          Status = "ok"          // measured
	StatusFailed      Status = "failed"      // a failure class says why (engine.Failure)
	StatusInterrupted Status = "interrupted" // the study was stopped mid-trial; a resume re-runs it
)
