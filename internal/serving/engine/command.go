package engine

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Image is engine e's official container image of release v: the
// image a command written for v starts on.
func Image(e Engine, v Version) string {
	tag := "v" + v.String()
	if t, ok := newestTags[e]; ok && v == NewestVersion(e) {
		tag = t
	}
	if e == SGLang {
		return "lmsysorg/sglang:" + tag
	}
	return "vllm/vllm-openai:" + tag
}

// ImageRelease is the engine release an image's tag names
// (vllm/vllm-openai:v0.11.0 is 0.11.0); false for no tag, "latest" or a
// tag that is not a release.
func ImageRelease(image string) (Version, bool) {
	ref := image[strings.LastIndex(image, "/")+1:]
	_, tag, ok := strings.Cut(ref, ":")
	if !ok {
		return Version{}, false
	}
	v, err := ParseVersion(tag)
	return v, err == nil
}

// Release is the engine release a study's commands are for: the one its
// image names (image may be ""), else the newest the flag table knows.
func Release(e Engine, image string) Version {
	if v, ok := ImageRelease(image); ok && CheckVersion(e, v) == nil {
		return v
	}
	return NewestVersion(e)
}

// newestTags are the image tags of the newest releases where the release
// was published as a rebuild (versions.go's releases).
var newestTags = map[Engine]string{SGLang: "v0.5.10.post1"}

// DefaultImage is engine e's official container image of the newest
// release the flag table knows (NewestVersion): the release every printed
// command is for unless another is asked for, so a manifest or docker run
// line starts the engine its flags were checked against.
func DefaultImage(e Engine) string { return Image(e, NewestVersion(e)) }

// ContainerPort is the port an engine listens on inside its container.
const ContainerPort = 8000

// HealthPath is where both engines' servers answer 200 once they serve
// (vLLM's and SGLang's /health).
const HealthPath = "/health"

// ServeCommand is the argv that starts engine e serving model with
// settings s, then extra: `vllm serve MODEL ...` or `python3 -m
// sglang.launch_server --model-path MODEL ...`. Settings Render rejects are
// left out (check them with Render or Check first); an unknown engine gives
// nil.
func ServeCommand(e Engine, model string, s Settings, extra []string) []string {
	var argv []string
	switch e {
	case VLLM:
		argv = []string{"vllm", "serve", model}
	case SGLang:
		argv = []string{"python3", "-m", "sglang.launch_server", Flag(SGLang, "model"), model}
	default:
		return nil
	}
	flags, _ := Render(e, s)
	argv = append(argv, flags...)
	return append(argv, extra...)
}

// ContainerArgs is the command of a container of engine e's image serving
// model with the rendered flags args on port: vLLM's image has `vllm serve`
// as its entry point and takes `--model MODEL [flags]`; SGLang's has none
// and runs the launch module, listening on all interfaces.
func ContainerArgs(e Engine, model string, args []string, port int) []string {
	if e == SGLang {
		argv := append([]string{"python3", "-m", "sglang.launch_server", Flag(SGLang, "model"), model}, args...)
		return append(argv, Flag(SGLang, "host"), "0.0.0.0", Flag(SGLang, "port"), strconv.Itoa(port))
	}
	argv := append([]string{Flag(VLLM, "model"), model}, args...)
	if port != ContainerPort {
		argv = append(argv, Flag(VLLM, "port"), strconv.Itoa(port))
	}
	return argv
}

// DockerHFCache is the docker run volume of the host's Hugging Face cache:
// the shell expands $HOME (ShellQuote writes it so).
const DockerHFCache = "$HOME/.cache/huggingface:/root/.cache/huggingface"

// DockerRun is the `docker run` line that serves model with settings s
// (then extra) on gpus GPUs of the host, as the engines' documentation
// deploys them: the GPUs by index, the host's IPC namespace, port 8000, the
// Hugging Face cache mounted and HF_TOKEN passed by name.
func DockerRun(e Engine, image, model string, s Settings, extra []string, gpus int) []string {
	if image == "" {
		image = DefaultImage(e)
	}
	ids := make([]string, max(gpus, 1))
	for i := range ids {
		ids[i] = strconv.Itoa(i)
	}
	port := strconv.Itoa(ContainerPort)
	// --gpus takes CSV: the double quotes keep "device=0,1" one field.
	argv := []string{"docker", "run", "--rm", "--gpus", `"device=` + strings.Join(ids, ",") + `"`, "--ipc=host",
		"-p", port + ":" + port, "-v", DockerHFCache, "-e", "HF_TOKEN", image}
	flags, _ := Render(e, s)
	return append(argv, ContainerArgs(e, model, append(flags, extra...), ContainerPort)...)
}

// SimServeArgs are the arguments of `servetune sim serve` for a launcher
// template: the model, the rendered flags, then where to listen. The
// placeholders ({model}, {args}, {host}, {port}) are the process launcher's.
func SimServeArgs() []string {
	return []string{"sim", "serve", Flag(VLLM, "model"), "{model}", "{args}", Flag(VLLM, "host"), "{host}", Flag(VLLM, "port"), "{port}"}
}

// SimLoadTimeArgs are the flags that set the simulated start-up time.
func SimLoadTimeArgs(d string) []string { return []string{Flag(VLLM, "sim_load_time"), d} }

// ShellQuote is the one encoder of a word for a POSIX shell (bash, and the
// Slurm scripts launcher/slurm writes): a word of safe characters as it
// is, else in single quotes, else (a word holding a control character, a
// line break or invalid UTF-8) in bash's ANSI-C quotes, byte by byte, so
// that the quoted word is always one word on one line and the shell reads
// back exactly s. DockerHFCache is the one word written for the shell to
// expand ($HOME).
func ShellQuote(s string) string {
	if s != "" && strings.Trim(s, shellSafe) == "" {
		return s
	}
	if s == DockerHFCache {
		return `"$HOME"` + strings.TrimPrefix(s, "$HOME")
	}
	if !shellPlain(s) {
		var b strings.Builder
		b.WriteString("$'")
		for i := 0; i < len(s); {
			r, n := utf8.DecodeRuneInString(s[i:])
			switch {
			case r == '\\' || r == '\'':
				b.WriteByte('\\')
				b.WriteRune(r)
			case r == '\n':
				b.WriteString(`\n`)
			case r == '\t':
				b.WriteString(`\t`)
			case r == utf8.RuneError && n <= 1 || !unicode.IsPrint(r) && r != ' ':
				for _, c := range []byte(s[i : i+n]) {
					fmt.Fprintf(&b, `\x%02x`, c)
				}
			default:
				b.WriteString(s[i : i+n])
			}
			i += n
		}
		b.WriteByte('\'')
		return b.String()
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// shellSafe are the characters no shell gives a meaning to in a word.
const shellSafe = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=,+@%"

// shellPlain reports whether s is valid UTF-8 of printable characters and
// spaces only: single quotes keep it on one line, as the terminal shows it.
func shellPlain(s string) bool {
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) && r != ' ' {
			return false
		}
	}
	return true
}

// ShellJoin is argv as one line to paste into a POSIX shell.
func ShellJoin(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = ShellQuote(a)
	}
	return strings.Join(q, " ")
}
