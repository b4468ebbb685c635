//! Every field declared, as a rule (issue 50, "Done when": a new field in a backend's store
//! side without a form declaration fails to build or fails a named test).
//!
//! An explorer prunes a run at a state it has seen, comparing the state's form
//! ([`pacesim::form`]): what the world and every checker declare of themselves, through their
//! `Hash` (exact) and their `fn form` (instants relative to now, slack, left out with a reason).
//! A field that no declaration names is left out silently, and two states that differ only in
//! it are taken for one. The rule that makes such a field fail to build instead is read here
//! from the source (`src/`, `examples/`, `tests/`; comments and literals left out):
//!
//! 1. every `fn form` with a body declares its type's fields: it destructures its type with no
//!    `..` (`let GcraStore { tat, backoff, gcra } = self;`: a field added later is E0027 until
//!    it is named), each bound name read again in the body (or bound to `_`, said ignored);
//!    or it hashes the whole value by its `Hash` (`f.exact(self)`, `fingerprint(self)`); or it
//!    calls a method of its own (`self.world_form(..)`) whose body so destructures it;
//! 2. every hand-written `impl Hash` destructures its type the same way: a struct by a pattern
//!    with no `..`, a tuple struct by one of its arity (`let Rng(stream) = self;`), an enum by
//!    a `match` naming each variant with fields, with no `..` and no `_` arm;
//! 3. every `exact_hash!` names exactly its type's fields (the macro's pattern has no `..`);
//! 4. every `impl StoreSide for X` / `impl ProcessSide for X` declares `X`'s `Hash` (its
//!    default form is `f.exact(self)`): `#[derive(Hash)]` (every field exact), `exact_hash!`,
//!    or a hand-written `impl Hash` held to rule 2; and its `form`, when it writes one, is held
//!    to rule 1.
//!
//! The compiler holds a destructuring to its fields; this test holds every declaration to a
//! destructuring. A failure names each offender by file and line.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The `fn form`s that declare nothing of their type's fields, each with why that is right.
/// (Every entry must still name a form: a stale one fails.)
const UNDECLARED_FORMS: &[(&str, &str, &str)] = &[(
    "src/trace/sink.rs",
    "Sink",
    "the trait's default for a team's checker: its `state()` word, absolute (the checker's own declaration)",
)];

/// One source file: its path (from the crate root), and its code with comments and the insides
/// of string and char literals blanked (same length, newlines kept: offsets are the file's).
struct File {
    path: String,
    code: String,
}

impl File {
    fn new(path: &str, text: &str) -> File {
        File {
            path: path.to_string(),
            code: blank(text),
        }
    }

    /// `path:line` of byte offset `at`.
    fn at(&self, at: usize) -> String {
        let line = 1 + self.code.as_bytes()[..at].iter().filter(|&&b| b == b'\n').count();
        format!("{}:{line}", self.path)
    }
}

/// The code of `text`: comments, and what is inside string and char literals, replaced by
/// spaces (newlines kept), so that braces, commas and `..` are read only where they are code.
fn blank(text: &str) -> String {
    let s = text.as_bytes();
    let mut out = s.to_vec();
    let wipe = |out: &mut Vec<u8>, from: usize, to: usize| {
        for b in &mut out[from..to] {
            if *b != b'\n' {
                *b = b' ';
            }
        }
    };
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        let prev_ident = i > 0 && is_ident(s[i - 1]);
        if c == b'/' && s.get(i + 1) == Some(&b'/') {
            let end = s[i..].iter().position(|&b| b == b'\n').map_or(s.len(), |n| i + n);
            wipe(&mut out, i, end);
            i = end;
        } else if c == b'/' && s.get(i + 1) == Some(&b'*') {
            let (mut depth, mut j) = (1, i + 2);
            while j < s.len() && depth > 0 {
                if s[j] == b'/' && s.get(j + 1) == Some(&b'*') {
                    depth += 1;
                    j += 2;
                } else if s[j] == b'*' && s.get(j + 1) == Some(&b'/') {
                    depth -= 1;
                    j += 2;
                } else {
                    j += 1;
                }
            }
            wipe(&mut out, i, j);
            i = j;
        } else if (c == b'r' || (c == b'b' && s.get(i + 1) == Some(&b'r'))) && !prev_ident && {
            let k = i + if c == b'b' { 2 } else { 1 };
            let hashes = s[k..].iter().take_while(|&&b| b == b'#').count();
            s.get(k + hashes) == Some(&b'"')
        } {
            // a raw string: r"..", r#".."#
            let k = i + if c == b'b' { 2 } else { 1 };
            let hashes = s[k..].iter().take_while(|&&b| b == b'#').count();
            let body = k + hashes + 1;
            let close: Vec<u8> = std::iter::once(b'"').chain(std::iter::repeat_n(b'#', hashes)).collect();
            let end = (body..s.len())
                .find(|&j| s[j..].starts_with(&close))
                .map_or(s.len(), |j| j + close.len());
            wipe(&mut out, body, end.saturating_sub(close.len()).max(body));
            i = end;
        } else if c == b'"' {
            let mut j = i + 1;
            while j < s.len() && s[j] != b'"' {
                j += if s[j] == b'\\' { 2 } else { 1 };
            }
            wipe(&mut out, i + 1, j.min(s.len()));
            i = j + 1;
        } else if c == b'\'' {
            // a char literal ('x', '\n', '\u{..}', 'é'), or a lifetime ('a, '_)
            let end = if s.get(i + 1) == Some(&b'\\') {
                (i + 3..s.len()).find(|&j| s[j] == b'\'')
            } else {
                let len = text[i + 1..].chars().next().map_or(1, char::len_utf8);
                (s.get(i + 1 + len) == Some(&b'\'')).then_some(i + 1 + len)
            };
            match end {
                Some(e) => {
                    wipe(&mut out, i + 1, e);
                    i = e + 1;
                }
                None => i += 1,
            }
        } else {
            i += 1;
        }
    }
    String::from_utf8(out).expect("blanking keeps the text UTF-8")
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The offsets where the word `w` stands alone (not part of a longer identifier).
fn words<'a>(code: &'a str, w: &'a str) -> impl Iterator<Item = usize> + 'a {
    let s = code.as_bytes();
    code.match_indices(w)
        .map(|(i, _)| i)
        .filter(move |&i| (i == 0 || !is_ident(s[i - 1])) && s.get(i + w.len()).is_none_or(|&b| !is_ident(b)))
}

/// The identifier at `i` (after any whitespace), and where it ends.
fn ident_at(code: &str, i: usize) -> (String, usize) {
    let s = code.as_bytes();
    let mut i = i;
    while i < s.len() && s[i].is_ascii_whitespace() {
        i += 1;
    }
    let start = i;
    while i < s.len() && is_ident(s[i]) {
        i += 1;
    }
    (code[start..i].to_string(), i)
}

/// The first non-space offset at or after `i`.
fn skip_space(code: &str, mut i: usize) -> usize {
    let s = code.as_bytes();
    while i < s.len() && s[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

/// The offset of the bracket closing the one at `open` (`{`, `(`, `[`, or `<` counting only
/// angle brackets that are not part of `->` or `=>`).
fn closing(code: &str, open: usize) -> Option<usize> {
    let s = code.as_bytes();
    let mut depth = 0i32;
    let angle = s[open] == b'<';
    for (j, &b) in s.iter().enumerate().skip(open) {
        let arrow = j > 0 && (s[j - 1] == b'-' || s[j - 1] == b'=');
        let (up, down) = if angle {
            (b == b'<', b == b'>' && !arrow)
        } else {
            (matches!(b, b'{' | b'(' | b'['), matches!(b, b'}' | b')' | b']'))
        };
        if up {
            depth += 1;
        } else if down {
            depth -= 1;
            if depth == 0 {
                return Some(j);
            }
        }
    }
    None
}

/// `s` split at its commas that lie outside every bracket, each part trimmed, empty parts
/// (a trailing comma) left out.
fn split_top(s: &str) -> Vec<&str> {
    let b = s.as_bytes();
    let (mut depth, mut from, mut parts) = (0i32, 0, Vec::new());
    for (j, &c) in b.iter().enumerate() {
        let arrow = j > 0 && (b[j - 1] == b'-' || b[j - 1] == b'=');
        match c {
            b'{' | b'(' | b'[' | b'<' => depth += 1,
            b'}' | b')' | b']' => depth -= 1,
            b'>' if !arrow => depth -= 1,
            b',' if depth == 0 => {
                parts.push(s[from..j].trim());
                from = j + 1;
            }
            _ => {}
        }
    }
    parts.push(s[from..].trim());
    parts.retain(|p| !p.is_empty());
    parts
}

/// `s` without its leading attributes (`#[..]`) and visibility (`pub`, `pub(crate)`).
fn bare(s: &str) -> &str {
    let mut s = s.trim_start();
    loop {
        if s.starts_with("#[") {
            let end = closing(s, 1).unwrap_or(s.len() - 1);
            s = s[end + 1..].trim_start();
        } else if let Some(rest) = s.strip_prefix("pub") {
            let rest = rest.trim_start();
            s = if rest.starts_with('(') {
                rest[closing(rest, 0).unwrap_or(rest.len() - 1) + 1..].trim_start()
            } else {
                rest
            };
        } else {
            return s;
        }
    }
}

/// A type's fields.
#[derive(Clone, Debug, PartialEq)]
enum Shape {
    Unit,
    Named(Vec<String>),
    Tuple(usize),
    /// Each variant: its name and fields.
    Enum(Vec<(String, Shape)>),
}

/// The fields of a struct or variant body beginning at `i` (`{`, `(`, or neither), and where
/// it ends.
fn shape_at(code: &str, i: usize) -> (Shape, usize) {
    let i = skip_space(code, i);
    match code.as_bytes().get(i) {
        Some(b'{') => {
            let end = closing(code, i).unwrap_or(code.len() - 1);
            let names = split_top(&code[i + 1..end])
                .into_iter()
                .map(|f| ident_at(bare(f), 0).0)
                .collect();
            (Shape::Named(names), end + 1)
        }
        Some(b'(') => {
            let end = closing(code, i).unwrap_or(code.len() - 1);
            (Shape::Tuple(split_top(&code[i + 1..end]).len()), end + 1)
        }
        _ => (Shape::Unit, i),
    }
}

/// A type defined in a file: its shape, whether it derives `Hash`, and where.
#[derive(Clone, Debug)]
struct Def {
    shape: Shape,
    derives_hash: bool,
    file: usize,
}

/// The attributes just before offset `i` (an item's keyword, after its visibility).
fn attributes_before(code: &str, i: usize) -> String {
    let s = code.as_bytes();
    let mut j = i;
    let mut attrs = String::new();
    loop {
        let mut k = j;
        while k > 0 && s[k - 1].is_ascii_whitespace() {
            k -= 1;
        }
        // a visibility: `pub`, `pub(crate)`
        if code[..k].ends_with(')') {
            let open = (0..k).rev().find(|&o| s[o] == b'(' && closing(code, o) == Some(k - 1));
            if let Some(o) = open
                && code[..o].trim_end().ends_with("pub")
            {
                j = code[..o].trim_end().len() - 3;
                continue;
            }
        }
        if code[..k].ends_with("pub") && (k == 3 || !is_ident(s[k - 4])) {
            j = k - 3;
            continue;
        }
        if k > 0 && s[k - 1] == b']' {
            let open = (0..k).rev().find(|&o| s[o] == b'[' && closing(code, o) == Some(k - 1));
            if let Some(o) = open
                && o > 0
                && s[o - 1] == b'#'
            {
                attrs.push_str(&code[o - 1..k]);
                j = o - 1;
                continue;
            }
        }
        return attrs;
    }
}

/// The structs and enums of every file, by name (a name defined in several files: each).
fn definitions(files: &[File]) -> BTreeMap<String, Vec<Def>> {
    let mut out: BTreeMap<String, Vec<Def>> = BTreeMap::new();
    for (n, f) in files.iter().enumerate() {
        let code = &f.code;
        for kw in ["struct", "enum"] {
            for at in words(code, kw) {
                let (name, mut i) = ident_at(code, at + kw.len());
                if name.is_empty() || !name.as_bytes()[0].is_ascii_uppercase() {
                    continue;
                }
                i = skip_space(code, i);
                if code.as_bytes().get(i) == Some(&b'<') {
                    i = closing(code, i).map_or(i, |e| e + 1);
                }
                // a `where` clause before the body
                let body = code[i..].find(['{', '(', ';']).map_or(code.len(), |k| i + k);
                let attrs = attributes_before(code, at);
                let derives_hash = attrs.split("derive(").skip(1).any(|d| {
                    let d = &d[..d.find(')').unwrap_or(d.len())];
                    d.split(',').any(|t| t.trim().rsplit("::").next() == Some("Hash"))
                });
                let shape = if kw == "struct" {
                    shape_at(code, body).0
                } else {
                    let end = closing(code, body).unwrap_or(code.len() - 1);
                    let variants = split_top(&code[body + 1..end])
                        .into_iter()
                        .map(|v| {
                            let v = bare(v);
                            let (name, e) = ident_at(v, 0);
                            (name, shape_at(v, e).0)
                        })
                        .collect();
                    Shape::Enum(variants)
                };
                out.entry(name).or_default().push(Def {
                    shape,
                    derives_hash,
                    file: n,
                });
            }
        }
    }
    out
}

/// A block of items: an `impl` (of a trait or not) or a trait's definition.
#[derive(Clone, Debug)]
struct Block {
    file: usize,
    /// The item's keyword.
    at: usize,
    /// Its braces.
    open: usize,
    close: usize,
    /// The trait implemented (its last segment: `Hash`), if any; for a trait's definition,
    /// its own name.
    tr: Option<String>,
    /// The type implemented (its last segment: `GcraStore`); empty for a trait's definition.
    ty: String,
}

/// The last segment of the path at `i` (`std::hash::Hash` -> `Hash`, `Sim<'_, B>` -> `Sim`,
/// `&'a T` -> `T`), and where the path ends.
fn path_at(code: &str, i: usize) -> (String, usize) {
    let s = code.as_bytes();
    let mut i = skip_space(code, i);
    loop {
        // references and lifetimes before the path
        if s.get(i) == Some(&b'&') {
            i = skip_space(code, i + 1);
            if s.get(i) == Some(&b'\'') {
                i = skip_space(code, ident_at(code, i + 1).1);
            }
            if code[i..].starts_with("mut ") {
                i = skip_space(code, i + 3);
            }
            continue;
        }
        break;
    }
    let mut last = String::new();
    loop {
        let (seg, e) = ident_at(code, i);
        if seg.is_empty() {
            return (last, i);
        }
        last = seg;
        i = e;
        if s.get(i) == Some(&b'<') {
            i = closing(code, i).map_or(i, |c| c + 1);
        }
        if code[i..].starts_with("::") {
            i += 2;
        } else {
            return (last, i);
        }
    }
}

/// Every `impl` block and trait definition of a file that is an item (not `impl Trait` in a
/// type), with its braces.
fn blocks(files: &[File]) -> Vec<Block> {
    let mut out = Vec::new();
    for (n, f) in files.iter().enumerate() {
        let code = &f.code;
        let s = code.as_bytes();
        for at in words(code, "impl") {
            // an item: after a block, a statement, an attribute, `unsafe`, or the file's start
            let before = code[..at].trim_end();
            let before = before.strip_suffix("unsafe").map_or(before, str::trim_end);
            if !(before.is_empty() || before.ends_with(['}', ';', '{', ']'])) {
                continue;
            }
            let mut i = skip_space(code, at + 4);
            if s.get(i) == Some(&b'<') {
                i = closing(code, i).map_or(i, |c| c + 1);
            }
            if !s.get(skip_space(code, i)).is_some_and(|&b| is_ident(b) || b == b'&') {
                continue; // a macro's `impl$(..)`: not this file's type
            }
            let (first, e) = path_at(code, i);
            let rest = skip_space(code, e);
            let (tr, ty, e) = if words(&code[rest..], "for").next() == Some(0) {
                let (ty, e) = path_at(code, rest + 3);
                (Some(first), ty, e)
            } else {
                (None, first, e)
            };
            let Some(open) = code[e..].find('{').map(|k| e + k) else {
                continue;
            };
            let Some(close) = closing(code, open) else {
                continue;
            };
            out.push(Block {
                file: n,
                at,
                open,
                close,
                tr,
                ty,
            });
        }
        for at in words(code, "trait") {
            let (name, e) = ident_at(code, at + 5);
            let Some(open) = code[e..].find(['{', ';']).map(|k| e + k) else {
                continue;
            };
            if s[open] != b'{' || name.is_empty() {
                continue;
            }
            let Some(close) = closing(code, open) else {
                continue;
            };
            out.push(Block {
                file: n,
                at,
                open,
                close,
                tr: Some(name),
                ty: String::new(),
            });
        }
    }
    out
}

/// A function with a body: its name, where its `fn` is, and its body's braces.
#[derive(Clone, Debug)]
struct Fn {
    name: String,
    at: usize,
    open: usize,
    close: usize,
}

/// The functions with bodies between `from` and `to` of a file's code.
fn functions(code: &str, from: usize, to: usize) -> Vec<Fn> {
    let s = code.as_bytes();
    let mut out = Vec::new();
    for at in words(&code[from..to], "fn").map(|k| from + k) {
        let (name, e) = ident_at(code, at + 2);
        if name.is_empty() {
            continue;
        }
        let Some(paren) = code[e..to].find('(').map(|k| e + k) else {
            continue;
        };
        let Some(after) = closing(code, paren) else {
            continue;
        };
        let Some(open) = code[after..to].find(['{', ';']).map(|k| after + k) else {
            continue;
        };
        if s[open] != b'{' {
            continue; // a declaration
        }
        if let Some(close) = closing(code, open) {
            out.push(Fn { name, at, open, close });
        }
    }
    out
}

/// A destructuring of a type in a body: `let T { .. } =` or `let T(..) =` (or `Self`), or a
/// variant's pattern `T::V { .. }` / `T::V(..)` (or `Self::V`).
#[derive(Clone, Debug)]
struct Pattern {
    at: usize,
    /// The variant, for an enum's.
    variant: Option<String>,
    /// The fields it names and what each binds (`None`: ignored, `_` or `_name`); or its
    /// arity, for a tuple pattern.
    names: Vec<(String, Option<String>)>,
    arity: Option<usize>,
    /// It has `..` somewhere (fields left unnamed).
    rest: bool,
    end: usize,
}

/// The patterns of type `ty` (or `Self`) in `code[from..to]`: `let`s when `variants` is false,
/// variants (`ty::V`, `Self::V`) when true.
fn patterns(code: &str, from: usize, to: usize, ty: &str, variants: bool) -> Vec<Pattern> {
    let s = code.as_bytes();
    let mut out = Vec::new();
    for name in [ty, "Self"] {
        for at in words(&code[from..to], name).map(|k| from + k) {
            let mut i = at + name.len();
            let mut variant = None;
            if variants {
                if !code[i..].starts_with("::") {
                    continue;
                }
                let (v, e) = ident_at(code, i + 2);
                if v.is_empty() {
                    continue;
                }
                variant = Some(v);
                i = e;
            } else {
                let before = code[..at].trim_end();
                if !before.ends_with("let") || before.len() > 3 && is_ident(s[before.len() - 4]) {
                    continue;
                }
            }
            let i = skip_space(code, i);
            let Some(close) = matches!(s.get(i), Some(b'{' | b'('))
                .then(|| closing(code, i))
                .flatten()
            else {
                continue;
            };
            let inner = &code[i + 1..close];
            let after = skip_space(code, close + 1);
            // a pattern: `let` binds with `=`, an arm goes on with `=>` or `|`, a nested one
            // with `,` or `)`; an expression building a value (`Self { a, b }` returned) is
            // followed by nothing of these
            let binds = s.get(after) == Some(&b'=') && s.get(after + 1) != Some(&b'=');
            if !variants && !binds {
                continue;
            }
            if variants && !code[after..].starts_with("=>") && !code[after..].starts_with('|') {
                continue;
            }
            let parts = split_top(inner);
            let rest = inner.contains("..");
            let (names, arity) = if s[i] == b'{' {
                let names = parts
                    .iter()
                    .filter(|p| **p != "..")
                    .map(|p| {
                        let p = p.trim_start_matches("ref ").trim_start_matches("mut ").trim();
                        let (field, bind) = match p.split_once(':') {
                            Some((f, b)) => (f.trim().to_string(), b.trim().to_string()),
                            None => (p.to_string(), p.to_string()),
                        };
                        let bound = (!bind.starts_with('_') && bind.bytes().all(is_ident)).then_some(bind);
                        (field, bound)
                    })
                    .collect();
                (names, None)
            } else {
                (Vec::new(), Some(parts.len()))
            };
            out.push(Pattern {
                at,
                variant,
                names,
                arity,
                rest,
                end: close + 1,
            });
        }
    }
    out.sort_by_key(|p| p.at);
    out
}

/// What is wrong with `p` as a whole declaration of `shape` (a struct's or a variant's), its
/// names to be read again in `code[p.end..to]`.
fn incomplete(p: &Pattern, shape: &Shape, code: &str, to: usize) -> Option<String> {
    if p.rest {
        return Some("leaves fields out with `..`".into());
    }
    match (shape, p.arity) {
        (Shape::Named(fields), None) => {
            let named: Vec<&String> = p.names.iter().map(|(f, _)| f).collect();
            let missing: Vec<&String> = fields.iter().filter(|f| !named.contains(f)).collect();
            if !missing.is_empty() {
                return Some(format!("does not name {missing:?}"));
            }
            for (field, bound) in &p.names {
                if let Some(b) = bound
                    && words(&code[p.end..to], b).next().is_none()
                {
                    return Some(format!(
                        "binds `{field}` and never reads it (bind it to `_` with the reason it is left out)"
                    ));
                }
            }
            None
        }
        (Shape::Tuple(n), Some(a)) if *n == a => None,
        (Shape::Tuple(n), Some(a)) => Some(format!("binds {a} of its {n} fields")),
        (Shape::Unit, _) => None,
        _ => Some("does not match the type's shape".into()),
    }
}

/// What is wrong with the body `code[open..close]` as a declaration of every field of
/// `def` (a struct or tuple struct: a `let` destructuring; an enum: a `match` naming every
/// variant with fields), or `None` when it declares them all.
fn undeclared(code: &str, open: usize, close: usize, ty: &str, def: &Def) -> Option<String> {
    match &def.shape {
        Shape::Unit => None,
        Shape::Enum(variants) => {
            let ps = patterns(code, open, close, ty, true);
            let wild = words(&code[open..close], "_").any(|k| code[open + k + 1..].trim_start().starts_with("=>"));
            if wild {
                return Some("matches with a `_` arm (a variant added later is left out)".into());
            }
            for (v, shape) in variants {
                if *shape == Shape::Unit {
                    continue;
                }
                let mine: Vec<&Pattern> = ps.iter().filter(|p| p.variant.as_deref() == Some(v)).collect();
                if mine.is_empty() {
                    return Some(format!("names no pattern of its variant `{v}`"));
                }
                for p in mine {
                    if let Some(why) = incomplete(p, shape, code, close) {
                        return Some(format!("its pattern of `{v}` {why}"));
                    }
                }
            }
            None
        }
        shape => {
            let ps = patterns(code, open, close, ty, false);
            if ps.is_empty() {
                return Some(format!(
                    "destructures no `{ty}` (`let {ty} {{ .. every field .. }} = self;`)"
                ));
            }
            ps.iter()
                .find_map(|p| incomplete(p, shape, code, close).map(|why| format!("its destructuring {why}")))
        }
    }
}

/// The definition of `ty` that `file` sees: its own, else the only one of its tree (`src/`, an
/// example, the tests).
fn definition<'a>(defs: &'a BTreeMap<String, Vec<Def>>, files: &[File], file: usize, ty: &str) -> Option<&'a Def> {
    let all = defs.get(ty)?;
    if let Some(d) = all.iter().find(|d| d.file == file) {
        return Some(d);
    }
    // (`src`, `tests`, or one example: `examples/fixed_window.rs`, `examples/own-backend`)
    let root = |p: &str| {
        let n = if p.starts_with("examples/") { 2 } else { 1 };
        p.split('/').take(n).collect::<Vec<_>>().join("/")
    };
    let tree = root(&files[file].path);
    let mine: Vec<&Def> = all.iter().filter(|d| root(&files[d.file].path) == tree).collect();
    match mine.as_slice() {
        [one] => Some(one),
        _ => None,
    }
}

/// Every offender against the rules above, as `path:line: what`.
fn offenders(files: &[File]) -> Vec<String> {
    let defs = definitions(files);
    let blocks = blocks(files);
    let mut out = Vec::new();
    let mut allowed_seen = vec![false; UNDECLARED_FORMS.len()];
    // the block a function lies in: the innermost that holds it
    let holder = |file: usize, at: usize| {
        blocks
            .iter()
            .filter(|b| b.file == file && b.open < at && at < b.close)
            .min_by_key(|b| b.close - b.open)
    };
    // the exact_hash! declarations: type -> (file, offset, names)
    let mut exact_hash: BTreeMap<(usize, String), (usize, Vec<String>)> = BTreeMap::new();
    for (n, f) in files.iter().enumerate() {
        for at in words(&f.code, "exact_hash") {
            let code = &f.code;
            if !code[at..].starts_with("exact_hash!") {
                continue;
            }
            let open = skip_space(code, at + "exact_hash!".len());
            if code.as_bytes().get(open) != Some(&b'(') {
                continue;
            }
            let (ty, e) = ident_at(code, open + 1);
            if ty.is_empty() {
                continue; // the macro's own recursion (`@field`)
            }
            let Some(brace) = code[e..].find('{').map(|k| e + k) else {
                continue;
            };
            let close = closing(code, brace).unwrap_or(code.len() - 1);
            let names: Vec<String> = split_top(&code[brace + 1..close])
                .into_iter()
                .map(|p| ident_at(p, 0).0)
                .collect();
            match definition(&defs, files, n, &ty) {
                Some(Def {
                    shape: Shape::Named(fields),
                    ..
                }) => {
                    let missing: Vec<&String> = fields.iter().filter(|x| !names.contains(x)).collect();
                    if !missing.is_empty() || code[brace..close].contains("..") {
                        out.push(format!(
                            "{}: exact_hash!({ty}) does not name every field: {missing:?} left out",
                            f.at(at)
                        ));
                    }
                }
                _ => out.push(format!(
                    "{}: exact_hash!({ty}): no struct `{ty}` with named fields found",
                    f.at(at)
                )),
            }
            exact_hash.insert((n, ty), (at, names));
        }
    }
    // rule 2: hand-written `impl Hash`
    let mut hand_hash: BTreeMap<(usize, String), usize> = BTreeMap::new();
    for b in blocks
        .iter()
        .filter(|b| b.tr.as_deref() == Some("Hash") && !b.ty.is_empty())
    {
        let f = &files[b.file];
        hand_hash.insert((b.file, b.ty.clone()), b.at);
        match definition(&defs, files, b.file, &b.ty) {
            None => out.push(format!(
                "{}: impl Hash for {}: its definition not found",
                f.at(b.at),
                b.ty
            )),
            Some(def) => {
                if let Some(why) = undeclared(&f.code, b.open, b.close, &b.ty, def) {
                    out.push(format!("{}: impl Hash for {}: {why}", f.at(b.at), b.ty));
                }
            }
        }
    }
    // the types whose `Hash` is declared: derived, exact_hash!, or by hand (held to rule 2)
    let hash_declared = |file: usize, ty: &str| -> bool {
        let def = definition(&defs, files, file, ty);
        def.is_some_and(|d| d.derives_hash)
            || def.is_some_and(|d| {
                exact_hash.contains_key(&(d.file, ty.to_string())) || hand_hash.contains_key(&(d.file, ty.to_string()))
            })
            || exact_hash.contains_key(&(file, ty.to_string()))
            || hand_hash.contains_key(&(file, ty.to_string()))
    };
    // rule 1: every `fn form` with a body
    for (n, f) in files.iter().enumerate() {
        let code = &f.code;
        let fns = functions(code, 0, code.len());
        for form in fns.iter().filter(|g| g.name == "form") {
            let Some(b) = holder(n, form.at) else {
                out.push(format!("{}: fn form outside any impl", f.at(form.at)));
                continue;
            };
            let body = &code[form.open..form.close];
            let whole = body.contains("f.exact(self)") || body.contains("fingerprint(self)");
            if b.ty.is_empty() {
                // a trait's default
                let tr = b.tr.clone().unwrap_or_default();
                if let Some(k) = UNDECLARED_FORMS.iter().position(|(p, t, _)| *p == f.path && *t == tr) {
                    allowed_seen[k] = true;
                } else if !whole {
                    out.push(format!(
                        "{}: trait {tr}'s default fn form neither hashes the whole value (`f.exact(self)`) nor is listed with its reason",
                        f.at(form.at)
                    ));
                }
                continue;
            }
            if let Some(k) = UNDECLARED_FORMS.iter().position(|(p, t, _)| *p == f.path && *t == b.ty) {
                allowed_seen[k] = true;
                continue;
            }
            let Some(def) = definition(&defs, files, n, &b.ty) else {
                out.push(format!(
                    "{}: fn form of {}: its definition not found",
                    f.at(form.at),
                    b.ty
                ));
                continue;
            };
            if whole {
                if !hash_declared(n, &b.ty) {
                    out.push(format!(
                        "{}: fn form of {} hashes the whole value, whose Hash is not declared (derive, exact_hash!, or by hand)",
                        f.at(form.at),
                        b.ty
                    ));
                }
                // (any destructuring beside it is held to the rule too)
                if let Some(why) = undeclared(code, form.open, form.close, &b.ty, def)
                    && !why.starts_with("destructures no")
                {
                    out.push(format!("{}: fn form of {}: {why}", f.at(form.at), b.ty));
                }
                continue;
            }
            match undeclared(code, form.open, form.close, &b.ty, def) {
                None => {}
                Some(why) => {
                    // delegated to a method of its own that destructures it
                    let delegated = fns.iter().any(|g| {
                        g.name != "form"
                            && body.contains(&format!("self.{}(", g.name))
                            && holder(n, g.at).is_some_and(|h| h.ty == b.ty)
                            && undeclared(code, g.open, g.close, &b.ty, def).is_none()
                    });
                    if !delegated {
                        out.push(format!("{}: fn form of {}: {why}", f.at(form.at), b.ty));
                    }
                }
            }
        }
    }
    // rule 4: every store and process side declares its Hash
    for b in &blocks {
        let Some(tr) = b.tr.as_deref() else { continue };
        if !matches!(tr, "StoreSide" | "ProcessSide") || b.ty.is_empty() {
            continue;
        }
        if !hash_declared(b.file, &b.ty) {
            out.push(format!(
                "{}: impl {tr} for {}: its Hash is not declared (derive(Hash), exact_hash!, or by hand destructuring it)",
                files[b.file].at(b.at),
                b.ty
            ));
        }
    }
    for (k, seen) in allowed_seen.iter().enumerate() {
        if !seen && files.iter().any(|f| f.path == UNDECLARED_FORMS[k].0) {
            out.push(format!(
                "{}: listed in UNDECLARED_FORMS ({}) but has no such fn form",
                UNDECLARED_FORMS[k].0, UNDECLARED_FORMS[k].1
            ));
        }
    }
    out.sort();
    out.dedup();
    out
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries {
        let p = e.unwrap().path();
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n == "target" || n == "golden") {
                continue;
            }
            walk(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Every Rust file of the crate's tree: `src/`, `examples/` (a team's backends), `tests/`.
fn tree() -> Vec<File> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut paths = Vec::new();
    for d in ["src", "examples", "tests"] {
        walk(&root.join(d), &mut paths);
    }
    paths.sort();
    paths
        .iter()
        .map(|p| {
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
            File::new(&rel, &std::fs::read_to_string(p).unwrap())
        })
        .collect()
}

#[test]
fn every_form_and_hash_declares_every_field() {
    let files = tree();
    // (the reader reads the tree: the forms, hashes and sides it must see are there)
    let code = |p: &str| &files.iter().find(|f| f.path == p).expect(p).code;
    assert!(
        functions(
            code("src/backend/redis_gcra.rs"),
            0,
            code("src/backend/redis_gcra.rs").len()
        )
        .iter()
        .any(|f| f.name == "form")
    );
    let sides = blocks(&files)
        .iter()
        .filter(|b| matches!(b.tr.as_deref(), Some("StoreSide" | "ProcessSide")))
        .count();
    assert!(sides >= 20, "only {sides} store and process sides read");
    let bad = offenders(&files);
    assert!(
        bad.is_empty(),
        "{} declaration(s) leave fields out (a field no form names is silently left out of what \
         the explorer compares; see CONTRIBUTING's form checklist):\n{}",
        bad.len(),
        bad.join("\n")
    );
}

/// The reader on planted sources: each offence named with its file and line, and the
/// declarations that are right pass.
#[test]
fn the_form_reader_names_each_offender() {
    let good = r#"
/// A store side (a comment's `..` and { are not code)
#[derive(Debug)]
pub struct Store {
    tat: Option<u64>,
    map: BTreeMap<u32, (u32, u64)>,
    note: String,
}
pacesim::exact_hash!(Store { tat, map, note: ignored("a witness") });
impl StoreSide for Store {
    fn form(&self, f: &mut Form, now: Reading) {
        let Store { tat, map, note: _ } = self;
        f.word(tat.map_or(0, |t| t - now));
        f.exact(map);
        let s = "{ .. }";
    }
}
#[derive(Hash, Debug)]
struct Side(u64);
impl ProcessSide for Side {}
enum Op { A { m: Option<f64> }, B(u32), C }
impl std::hash::Hash for Op {
    fn hash<H: Hasher>(&self, h: &mut H) {
        match self {
            Op::A { m } => m.map(f64::to_bits).hash(h),
            Op::B(x) => x.hash(h),
            Op::C => {}
        }
    }
}
struct W(u64);
impl Hash for W {
    fn hash<H: Hasher>(&self, h: &mut H) {
        let W(x) = self;
        x.hash(h);
    }
}
"#;
    assert_eq!(offenders(&[File::new("src/good.rs", good)]), Vec::<String>::new());

    let bad = r#"
#[derive(Hash, Debug)]
pub struct Store {
    tat: Option<u64>,
    gen: u64,
}
impl StoreSide for Store {
    fn form(&self, f: &mut Form, now: Reading) {
        let Store { tat, .. } = self;
        f.word(tat.unwrap_or(0));
    }
}
#[derive(Debug)]
pub struct Skips {
    tat: Option<u64>,
}
crate::exact_hash!(Skips { tat });
impl StoreSide for Skips {
    fn form(&self, f: &mut Form, now: Reading) {
        f.word(self.tat.unwrap_or(0));
    }
}
#[derive(Debug)]
pub struct Proc {
    a: u64,
    b: u64,
}
impl ProcessSide for Proc {}
impl std::hash::Hash for Proc {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.a.hash(h);
    }
}
struct Both { a: u64, b: u64 }
crate::exact_hash!(Both { a });
impl Both {
    fn form(&self, f: &mut Form) {
        let Both { a, b } = self;
        f.word(*a);
    }
}
#[derive(Debug)]
struct Nothing { a: u64 }
impl ProcessSide for Nothing {}
enum E { A(u64), B { x: u64 } }
impl Hash for E {
    fn hash<H: Hasher>(&self, h: &mut H) {
        match self {
            E::A(x) => x.hash(h),
            _ => {}
        }
    }
}
"#;
    let got = offenders(&[File::new("src/bad.rs", bad)]);
    let want = [
        "src/bad.rs:8: fn form of Store: its destructuring leaves fields out with `..`",
        "src/bad.rs:19: fn form of Skips: destructures no `Skips`",
        "src/bad.rs:29: impl Hash for Proc: destructures no `Proc`",
        "src/bad.rs:35: exact_hash!(Both) does not name every field: [\"b\"] left out",
        "src/bad.rs:37: fn form of Both: its destructuring binds `b` and never reads it",
        "src/bad.rs:44: impl ProcessSide for Nothing: its Hash is not declared",
        "src/bad.rs:46: impl Hash for E: matches with a `_` arm",
    ];
    for w in want {
        assert!(got.iter().any(|g| g.starts_with(w)), "{w:?} not in\n{}", got.join("\n"));
    }
    assert_eq!(got.len(), want.len(), "{}", got.join("\n"));
}

/// The blanking keeps code and offsets, and blanks comments and literals only.
#[test]
fn the_reader_blanks_comments_and_literals_only() {
    let text = "let a = \"{..}\"; // { x\nlet b = '{'; let c: &'a str = r#\"}\"#; /* { */ let d = b'\\'';";
    let code = blank(text);
    assert_eq!(code.len(), text.len());
    assert!(!code.contains(['{', '}']), "{code}");
    assert!(
        code.contains("let a") && code.contains("let d") && code.contains("&'a str"),
        "{code}"
    );
    assert_eq!(code.matches('\n').count(), 1);
}
