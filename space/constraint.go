package space

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/servetune/servetune/internal/serving/engine"
)

// ErrBadConstraint is wrapped by errors in constraint expressions.
var ErrBadConstraint = errors.New("bad constraint")

// Constraint is one user constraint, a comparison of two arithmetic
// expressions over settings. The grammar is deliberately tiny:
//
//	constraint = sum cmp sum
//	cmp        = "<" | "<=" | ">" | ">=" | "==" | "!="
//	sum        = product { ("+" | "-") product }
//	product    = atom { ("*" | "/") atom }
//	atom       = NAME | NUMBER | STRING | "true" | "false" | "(" sum ")"
//
// NAME is a neutral setting name, NUMBER a decimal number, STRING a single-
// or double-quoted string. Strings and bools compare only with == and !=.
// Examples: "max_batched_tokens >= max_running_requests",
// "tensor_parallel * pipeline_parallel <= 4", `quantization != "fp8"`.
type Constraint struct {
	Expr string // the source text
	root *node
}

// node is a parsed expression: a leaf (name or literal) or an operator.
type node struct {
	op          string // "", "+", "-", "*", "/", or a comparison
	name        string // leaf: setting name
	lit         any    // leaf: float64, string or bool literal
	left, right *node
}

// ParseConstraint parses one constraint expression.
func ParseConstraint(expr string) (Constraint, error) {
	toks, err := lex(expr)
	if err != nil {
		return Constraint{}, err
	}
	p := &cparser{toks: toks}
	left, err := p.sum()
	if err != nil {
		return Constraint{}, err
	}
	op := p.next()
	switch op {
	case "<", "<=", ">", ">=", "==", "!=":
	case "":
		return Constraint{}, fmt.Errorf("%w: %q: needs a comparison (<, <=, >, >=, ==, !=)", ErrBadConstraint, expr)
	default:
		return Constraint{}, fmt.Errorf("%w: %q: unexpected %q where a comparison belongs", ErrBadConstraint, expr, op)
	}
	right, err := p.sum()
	if err != nil {
		return Constraint{}, err
	}
	if t := p.next(); t != "" {
		return Constraint{}, fmt.Errorf("%w: %q: unexpected %q after the comparison", ErrBadConstraint, expr, t)
	}
	return Constraint{Expr: expr, root: &node{op: op, left: left, right: right}}, nil
}

// Names returns the setting names the constraint refers to, in order of appearance.
func (c Constraint) Names() []string {
	var out []string
	var walk func(n *node)
	walk = func(n *node) {
		if n == nil {
			return
		}
		if n.op == "" && n.name != "" {
			for _, o := range out {
				if o == n.name {
					return
				}
			}
			out = append(out, n.name)
		}
		walk(n.left)
		walk(n.right)
	}
	walk(c.root)
	return out
}

// Holds reports whether s satisfies the constraint. It fails when a setting
// is missing or types do not match.
func (c Constraint) Holds(s Settings) (bool, error) {
	if c.root == nil {
		return false, fmt.Errorf("%w: %q was not parsed", ErrBadConstraint, c.Expr)
	}
	l, err := eval(c.root.left, s)
	if err != nil {
		return false, fmt.Errorf("%q: %w", c.Expr, err)
	}
	r, err := eval(c.root.right, s)
	if err != nil {
		return false, fmt.Errorf("%q: %w", c.Expr, err)
	}
	lf, lnum := l.(float64)
	rf, rnum := r.(float64)
	if lnum != rnum {
		return false, fmt.Errorf("%w: %q compares %v with %v", ErrBadConstraint, c.Expr, l, r)
	}
	switch c.root.op {
	case "==":
		return l == r, nil
	case "!=":
		return l != r, nil
	}
	if !lnum {
		return false, fmt.Errorf("%w: %q orders non-numbers", ErrBadConstraint, c.Expr)
	}
	switch c.root.op {
	case "<":
		return lf < rf, nil
	case "<=":
		return lf <= rf, nil
	case ">":
		return lf > rf, nil
	default: // ">="
		return lf >= rf, nil
	}
}

func (c Constraint) String() string { return c.Expr }

func eval(n *node, s Settings) (any, error) {
	if n.op == "" {
		if n.name == "" {
			return n.lit, nil
		}
		v, ok := s[n.name]
		if !ok {
			return nil, fmt.Errorf("%w: %s is not set", ErrBadConstraint, n.name)
		}
		if f, ok := s.Float(n.name); ok {
			return f, nil
		}
		return v, nil
	}
	l, err := eval(n.left, s)
	if err != nil {
		return nil, err
	}
	r, err := eval(n.right, s)
	if err != nil {
		return nil, err
	}
	lf, lok := l.(float64)
	rf, rok := r.(float64)
	if !lok || !rok {
		return nil, fmt.Errorf("%w: %q needs numbers", ErrBadConstraint, n.op)
	}
	switch n.op {
	case "+":
		return lf + rf, nil
	case "-":
		return lf - rf, nil
	case "*":
		return lf * rf, nil
	default: // "/"
		if rf == 0 {
			return nil, fmt.Errorf("%w: division by zero", ErrBadConstraint)
		}
		return lf / rf, nil
	}
}

// lex splits an expression into tokens: names, numbers, quoted strings
// (kept with a leading quote), operators and parentheses.
func lex(expr string) ([]string, error) {
	var toks []string
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == ' ' || c == '\t':
			i++
		case c == '(' || c == ')' || c == '+' || c == '-' || c == '*' || c == '/':
			toks = append(toks, string(c))
			i++
		case c == '<' || c == '>' || c == '=' || c == '!':
			if i+1 < len(expr) && expr[i+1] == '=' {
				toks = append(toks, expr[i:i+2])
				i += 2
				continue
			}
			if c == '=' || c == '!' {
				return nil, fmt.Errorf("%w: %q: %q must be followed by =", ErrBadConstraint, expr, string(c))
			}
			toks = append(toks, string(c))
			i++
		case c == '"' || c == '\'':
			j := strings.IndexByte(expr[i+1:], c)
			if j < 0 {
				return nil, fmt.Errorf("%w: %q: unterminated string", ErrBadConstraint, expr)
			}
			toks = append(toks, expr[i:i+1+j]) // opening quote marks a string token
			i += j + 2
		case c == '.' || (c >= '0' && c <= '9'):
			j := i
			for j < len(expr) && (expr[j] == '.' || expr[j] == 'e' || (expr[j] >= '0' && expr[j] <= '9')) {
				j++
			}
			toks = append(toks, expr[i:j])
			i = j
		case c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'):
			j := i
			for j < len(expr) && (expr[j] == '_' || (expr[j] >= 'a' && expr[j] <= 'z') || (expr[j] >= 'A' && expr[j] <= 'Z') || (expr[j] >= '0' && expr[j] <= '9')) {
				j++
			}
			toks = append(toks, expr[i:j])
			i = j
		default:
			return nil, fmt.Errorf("%w: %q: unexpected character %q", ErrBadConstraint, expr, c)
		}
	}
	return toks, nil
}

type cparser struct {
	toks  []string
	pos   int
	depth int
}

func (p *cparser) peek() string {
	if p.pos < len(p.toks) {
		return p.toks[p.pos]
	}
	return ""
}

func (p *cparser) next() string {
	t := p.peek()
	if t != "" {
		p.pos++
	}
	return t
}

// sum is products joined by + and -.
func (p *cparser) sum() (*node, error) { return p.chain(p.product, "+", "-") }

// product is atoms joined by * and /.
func (p *cparser) product() (*node, error) { return p.chain(p.atom, "*", "/") }

// chain is operands joined by either of two operators, left-associative:
// a - b + c is (a - b) + c.
func (p *cparser) chain(operand func() (*node, error), op1, op2 string) (*node, error) {
	left, err := operand()
	if err != nil {
		return nil, err
	}
	for t := p.peek(); t == op1 || t == op2; t = p.peek() {
		p.next()
		right, err := operand()
		if err != nil {
			return nil, err
		}
		left = &node{op: t, left: left, right: right}
	}
	return left, nil
}

// maxDepth bounds parenthesis nesting so hostile input cannot exhaust the stack.
const maxDepth = 32

func (p *cparser) atom() (*node, error) {
	t := p.next()
	switch {
	case t == "":
		return nil, fmt.Errorf("%w: expression ends too early", ErrBadConstraint)
	case t == "(":
		if p.depth++; p.depth > maxDepth {
			return nil, fmt.Errorf("%w: parentheses nested too deep", ErrBadConstraint)
		}
		n, err := p.sum()
		if err != nil {
			return nil, err
		}
		p.depth--
		if p.next() != ")" {
			return nil, fmt.Errorf("%w: missing )", ErrBadConstraint)
		}
		return n, nil
	case t[0] == '"' || t[0] == '\'':
		return &node{lit: t[1:]}, nil
	case t == "true" || t == "false":
		return &node{lit: t == "true"}, nil
	case t[0] == '.' || (t[0] >= '0' && t[0] <= '9'):
		f, err := strconv.ParseFloat(t, 64)
		if err != nil || math.IsInf(f, 0) {
			return nil, fmt.Errorf("%w: bad number %q", ErrBadConstraint, t)
		}
		return &node{lit: f}, nil
	case t[0] == '_' || (t[0] >= 'a' && t[0] <= 'z') || (t[0] >= 'A' && t[0] <= 'Z'):
		if _, ok := lookup(t); !ok {
			return nil, fmt.Errorf("%w: %w", ErrBadConstraint, engine.UnknownName(t))
		}
		return &node{name: t}, nil
	}
	return nil, fmt.Errorf("%w: unexpected %q", ErrBadConstraint, t)
}
