package report

import (
	"embed"
	"html/template"
	"io"
)

//go:embed templates
var files embed.FS

var templates = template.Must(template.New("").ParseFS(files, "templates/*.tmpl"))

// CSS is the style sheet of every page servetune writes (reports and the
// dashboard), to be inlined: the pages load nothing.
func CSS() template.CSS {
	b, err := files.ReadFile("templates/style.css")
	if err != nil {
		panic(err) // embedded at build time
	}
	return template.CSS(b)
}

// studyPage is the study template's data.
type studyPage struct {
	*view
	CSS template.CSS
}

// WriteHTML writes the study's report: one self-contained HTML file with
// inline SVG charts and CSS, no script, nothing loaded from anywhere.
func (s *StudyReport) WriteHTML(w io.Writer) error {
	return templates.ExecuteTemplate(w, "study.html.tmpl", studyPage{view: s.build(), CSS: CSS()})
}
