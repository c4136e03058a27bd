package tmpdeps

import (
	_ "github.com/NVIDIA/go-nvml/pkg/nvml"
	_ "github.com/c-bata/goptuna"
	_ "github.com/c-bata/goptuna/cmaes"
	_ "github.com/c-bata/goptuna/tpe"
	_ "github.com/docker/docker/api/types/container"
	_ "github.com/docker/docker/client"
	_ "github.com/mattn/go-sqlite3"
	_ "github.com/spf13/cobra"
	_ "gonum.org/v1/gonum/stat"
	_ "gonum.org/v1/plot"
	_ "gonum.org/v1/plot/vg/vgsvg"
	_ "gopkg.in/yaml.v3"
)
