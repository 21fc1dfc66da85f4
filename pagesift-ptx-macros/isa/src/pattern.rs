//! The pattern syntax of a form's opcode: literal text, `{a|b|c}` (exactly one alternative, an
//! empty one allowed: `{.ftz|}`) and `[x]` (optional, the same as `{x|}`), nested freely.

/// One piece of a pattern.
enum Node {
    Text(String),
    /// One of several sequences.
    Choice(Vec<Vec<Node>>),
}

/// Every text a pattern stands for, in the order its alternatives are written.
///
/// Panics on a malformed pattern (an unclosed or unmatched bracket): patterns are the table's
/// static data, and its tests expand every row.
pub(crate) fn expand(pattern: &str) -> Vec<String> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut pos = 0;
    let seq = parse_seq(&chars, &mut pos, pattern);
    assert!(
        pos == chars.len(),
        "pattern `{pattern}`: unmatched `{}`",
        chars[pos]
    );
    let mut out = vec![String::new()];
    expand_seq(&seq, &mut out);
    out
}

/// A sequence up to the end or to a `|`, `}` or `]` (left for the caller).
fn parse_seq(chars: &[char], pos: &mut usize, pattern: &str) -> Vec<Node> {
    let mut seq = Vec::new();
    let mut text = String::new();
    while let Some(&c) = chars.get(*pos) {
        match c {
            '|' | '}' | ']' => break,
            '{' | '[' => {
                if !text.is_empty() {
                    seq.push(Node::Text(std::mem::take(&mut text)));
                }
                *pos += 1;
                let close = if c == '{' { '}' } else { ']' };
                let mut alts = vec![parse_seq(chars, pos, pattern)];
                while c == '{' && chars.get(*pos) == Some(&'|') {
                    *pos += 1;
                    alts.push(parse_seq(chars, pos, pattern));
                }
                assert!(
                    chars.get(*pos) == Some(&close),
                    "pattern `{pattern}`: `{c}` is not closed by `{close}`"
                );
                *pos += 1;
                if c == '[' {
                    alts.push(Vec::new());
                }
                seq.push(Node::Choice(alts));
            }
            _ => {
                text.push(c);
                *pos += 1;
            }
        }
    }
    if !text.is_empty() {
        seq.push(Node::Text(text));
    }
    seq
}

/// Appends the sequence's texts to each prefix in `out` (the cross product, in order).
fn expand_seq(seq: &[Node], out: &mut Vec<String>) {
    for node in seq {
        match node {
            Node::Text(t) => out.iter_mut().for_each(|s| s.push_str(t)),
            Node::Choice(alts) => {
                let prefixes = std::mem::take(out);
                for p in &prefixes {
                    for alt in alts {
                        let mut part = vec![p.clone()];
                        expand_seq(alt, &mut part);
                        out.extend(part);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::expand;

    #[test]
    fn choices_and_options_expand_in_order() {
        assert_eq!(expand("add.f32"), ["add.f32"]);
        assert_eq!(
            expand("{add|sub}[.ftz].f32"),
            ["add.ftz.f32", "add.f32", "sub.ftz.f32", "sub.f32"]
        );
        assert_eq!(
            expand("ld{.relaxed.{cta|gpu}|}.u32"),
            ["ld.relaxed.cta.u32", "ld.relaxed.gpu.u32", "ld.u32"]
        );
    }

    #[test]
    #[should_panic(expected = "is not closed")]
    fn an_unclosed_choice_is_a_bug() {
        expand("add{.rn|.rz.f32");
    }
}
