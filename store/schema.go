package store

// migrations are the forward-only schema steps: migrations[i] takes a
// database from user_version i to i+1. Append new steps; never edit a
// released one. Times are UTC text in timeFormat; seeds are the uint64's bits
// as a signed integer.
var migrations = []string{
	// 1: studies, trials and their measurements.
	`CREATE TABLE studies (
		id       INTEGER PRIMARY KEY,
		name     TEXT NOT NULL UNIQUE,
		spec     TEXT NOT NULL,
		seed     INTEGER NOT NULL,
		started  TEXT NOT NULL,
		finished TEXT,
		status   TEXT NOT NULL CHECK (status IN ('running', 'finished', 'failed', 'interrupted'))
	);
	CREATE TABLE trials (
		id          INTEGER PRIMARY KEY,
		study_id    INTEGER NOT NULL REFERENCES studies(id) ON DELETE CASCADE,
		number      INTEGER NOT NULL,
		settings    TEXT NOT NULL,
		gpus        TEXT NOT NULL,
		status      TEXT NOT NULL CHECK (status IN ('running', 'ok', 'failed', 'pruned', 'interrupted')),
		failure     TEXT NOT NULL DEFAULT '', -- checked in Go: the list grows, a CHECK would need a table rebuild
		failure_msg TEXT NOT NULL DEFAULT '',
		log_tail    TEXT NOT NULL DEFAULT '',
		objective   REAL,
		started     TEXT NOT NULL,
		finished    TEXT,
		UNIQUE (study_id, number)
	);
	CREATE TABLE load_points (
		trial_id           INTEGER NOT NULL REFERENCES trials(id) ON DELETE CASCADE,
		level              TEXT NOT NULL,
		kind               TEXT NOT NULL,
		value              REAL NOT NULL,
		summary            TEXT NOT NULL,
		completed          INTEGER NOT NULL,
		failed             INTEGER NOT NULL,
		request_throughput REAL,
		output_throughput  REAL,
		request_goodput    REAL,
		median_ttft_ms     REAL,
		p99_ttft_ms        REAL,
		median_tpot_ms     REAL,
		p99_tpot_ms        REAL,
		p99_itl_ms         REAL,
		p99_e2el_ms        REAL,
		UNIQUE (trial_id, level)
	);
	CREATE TABLE requests (
		trial_id      INTEGER NOT NULL REFERENCES trials(id) ON DELETE CASCADE,
		level         TEXT NOT NULL,
		idx           INTEGER NOT NULL,
		warmup        INTEGER NOT NULL,
		sched_ns      INTEGER NOT NULL,
		send_ns       INTEGER NOT NULL,
		first_ns      INTEGER NOT NULL,
		last_ns       INTEGER NOT NULL,
		end_ns        INTEGER NOT NULL,
		prompt_tokens INTEGER NOT NULL,
		output_tokens INTEGER NOT NULL,
		error         TEXT NOT NULL,
		http_status   INTEGER NOT NULL
	);
	CREATE INDEX requests_by_trial ON requests (trial_id, level);
	CREATE TABLE gpu_samples (
		trial_id       INTEGER NOT NULL REFERENCES trials(id) ON DELETE CASCADE,
		t_ns           INTEGER NOT NULL,
		gpu            INTEGER NOT NULL,
		power_w        REAL,
		mem_used_bytes INTEGER NOT NULL,
		util_pct       REAL,
		sm_clock_mhz   INTEGER NOT NULL,
		energy_j       REAL
	);
	CREATE INDEX gpu_samples_by_trial ON gpu_samples (trial_id, gpu, t_ns);`,

	// 2: the lookups the tuner and reports make on every resume and render.
	`CREATE INDEX trials_by_status ON trials (study_id, status);
	CREATE INDEX load_points_by_goodput ON load_points (request_goodput);
	CREATE INDEX load_points_by_throughput ON load_points (output_throughput);`,

	// 3: the whole load of each point (burstiness, a rate's concurrency
	// cap), JSON; '' for points stored before it.
	`ALTER TABLE load_points ADD COLUMN load TEXT NOT NULL DEFAULT '';`,

	// 4: a study's one live owner (a lease renewed by its heartbeat), and
	// the Hugging Face config.json of a model the catalog lacks.
	`CREATE TABLE owners (
		study_id  INTEGER PRIMARY KEY REFERENCES studies(id) ON DELETE CASCADE,
		owner     TEXT NOT NULL, -- host/pid/start/run (internal/proc)
		started   TEXT NOT NULL,
		heartbeat TEXT NOT NULL
	);
	ALTER TABLE studies ADD COLUMN model_config TEXT NOT NULL DEFAULT '';
	-- the trial a confirmation run measures again; NULL for the sampler's
	ALTER TABLE trials ADD COLUMN confirms INTEGER;`,

	// 5: how long a trial's engine waited in a scheduler's queue, and how
	// long it took from starting to healthy; NULL when not queued or not
	// known.
	`ALTER TABLE trials ADD COLUMN pending_ns INTEGER;
	ALTER TABLE trials ADD COLUMN launch_ns INTEGER;`,

	// 6: how often a trial was started again after an interruption, and
	// the servetune version that created a study (for reports).
	`ALTER TABLE trials ADD COLUMN reruns INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE studies ADD COLUMN tool TEXT NOT NULL DEFAULT '';`,

	// 7: GPU temperature; a trial's quality verdict (measure.Quality as
	// JSON) and the study's quality baseline (the tuner's JSON); '' when
	// the study has no quality gate.
	`ALTER TABLE gpu_samples ADD COLUMN temp_c REAL;
	ALTER TABLE trials ADD COLUMN quality TEXT NOT NULL DEFAULT '';
	ALTER TABLE studies ADD COLUMN quality_baseline TEXT NOT NULL DEFAULT '';`,

	// 8: a study that stopped before its trial count on the sampler's
	// judgement: at which search trial of how many, and why ('' and 0
	// when it ran them all).
	`ALTER TABLE studies ADD COLUMN stop_reason TEXT NOT NULL DEFAULT '';
	ALTER TABLE studies ADD COLUMN stop_at INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE studies ADD COLUMN stop_of INTEGER NOT NULL DEFAULT 0;`,

	// 9: the sampler's forecast of the space (the guided sampler's, in
	// virtual time), one row a configuration, at most MaxForecasts a
	// study: what the report shows for values no trial measured.
	`CREATE TABLE forecasts (
		study_id INTEGER NOT NULL REFERENCES studies(id) ON DELETE CASCADE,
		idx      INTEGER NOT NULL,
		settings TEXT NOT NULL,
		value    REAL NOT NULL,    -- the objective's metric; 0 when no level is forecast to meet the SLOs
		met      INTEGER NOT NULL, -- a level is forecast to meet the SLOs
		p_start  REAL NOT NULL,    -- the chance that the engine starts
		failure  TEXT NOT NULL DEFAULT '',
		UNIQUE (study_id, idx)
	);`,
}

// SchemaVersion is the user_version of a database this package writes.
const SchemaVersion = 9 // len(migrations); a test keeps them equal
