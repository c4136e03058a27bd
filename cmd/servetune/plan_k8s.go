package main

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/servetune/servetune/internal/fleet"
	"github.com/servetune/servetune/internal/model/sim"
)

func planK8s(cmd *cobra.Command, cfg sim.Config, f *planFlags, q planQuestion, rep planReport, results []fleet.Result) error {
	return usageError(errors.New("--format k8s: not yet"))
}
