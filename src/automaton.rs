//! The one pass that finds every marker literal in a text: a DFA over the
//! first [`PREFIX`] bytes of each literal (its "anchor"), walked byte by byte
//! through two flat tables; at each prefix match, a test of the next
//! [`FOLLOW`] bytes against the bytes its literals continue with, and where one may,
//! a comparison of the whole anchors that share that prefix.
//!
//! The DFA is built by the aho-corasick crate (`aho_corasick::dfa::DFA`,
//! standard semantics, unanchored) and read out state by state into the
//! tables here. This module, not the crate's own search, walks them, and that
//! is on purpose: the shipped tables are built when the crate is built
//! (`build.rs` includes this file and writes the tables as statics), so a
//! fresh instance loads them without parsing or building anything, and
//! aho-corasick has no serialized form. A full DFA of the ~580 shipped
//! literals would take about 2 MiB (9,000 states, 56 byte classes, u32 ids),
//! twice the component's whole size budget. The prefix DFA of the 4,126
//! shipped literals of 4,264 markers had 1,084 match states and 1,102 rows
//! of 57 byte classes, each row padded to 64 ([`SCALE`]): 70,528 u16
//! entries, 138 KiB in memory, and the padding's zeros cost the component
//! about 6 KB. A row's offset is a multiple of 8, so the table stores it
//! divided by 8: a 16-bit table then holds about 8,000 rows, where offsets
//! themselves ran out at 1,130 (the shipped tables reached 1,102). A match
//! state at the end of a prefix moves on as a shorter state does, so it
//! borrows that row ([`Automaton::resume`]). Its follow masks ([`FOLLOW`]
//! for each match state, each an index into the few distinct masks) take
//! about 13 KB more, and all of it stays in cache. Operator markers and
//! test tables build the same tables at run time with [`build`].
//!
//! The step multiplies the stored value by 8 (a shift). Measured against
//! the alternatives in one session, by the benchmark's paired 64 KiB
//! classify (native / bare DFA scan, component / native): offsets without
//! the shift, 0.59x and 1.29x; the shift, 0.61x and 1.27x; a three-byte
//! prefix with six bytes tested after it (a third of the rows, 80 KB
//! smaller), 0.74x and 1.53x, because the walk stops at many more prefix
//! matches and each stop costs the component more than native code.
//!
//! Plain Rust, no I/O; it compiles both into the crate and into `build.rs`.

use std::borrow::Cow;

/// How many leading bytes of each literal the DFA holds.
pub const PREFIX: usize = 4;
/// How many bytes after a prefix match the walk tests against the bytes its
/// literals continue with ([`Automaton::follow`]) before it stops to verify.
/// Log text is full of words that begin as a literal does (`compiling`,
/// `running`, `module`); with two bytes tested, a 64 KiB build log stopped
/// the walk 1,395 times for 8 literals, with four, 235 times.
pub const FOLLOW: usize = 4;

/// The tables of one automaton; `'static` slices when shipped, owned when built.
#[derive(Clone, Debug)]
pub struct Automaton {
    /// Byte to equivalence class: the bytes that occur in a prefix have a
    /// class each, an upper-case ASCII letter its lower-case letter's, and
    /// every other byte shares class 0. So the walk is ASCII-case-insensitive
    /// and a text is scanned as it is, never lowered first.
    pub classes: Cow<'static, [u8; 256]>,
    /// The width of a row of `trans`: how many classes there are, rounded
    /// up to a multiple of [`SCALE`] (the columns past the classes are
    /// never read).
    pub stride: usize,
    /// The next state, at `state + class`: a state that is not a match
    /// state is the offset of its row (its row number times `stride`)
    /// divided by [`SCALE`], so a step is a load, a shift and an addition.
    /// A value from `first_match` on is match state `value - first_match`,
    /// which has no row: the walk stops there anyway, and goes on from the
    /// row `resume` names.
    pub trans: Trans,
    /// The start state's row offset (not divided by [`SCALE`]).
    pub start: u32,
    pub first_match: u32,
    /// For the `k`th match state, the number of a row with its transitions.
    /// A match state at the end of a prefix (most of them) moves as the
    /// longest suffix of the prefix that another prefix starts with does, so
    /// its row is that state's, and stored once; a match state that has no
    /// such twin gets a row of its own after the others.
    /// Row numbers, not offsets: there are fewer than 65,536 rows.
    pub resume: Cow<'static, [u16]>,
    /// For the `k`th match state (`first_match + k`), the literals to compare whole are
    /// `verify[ends[k - 1]..ends[k]]` (from 0 for k = 0).
    pub match_ends: Cow<'static, [u16]>,
    pub verify: Cow<'static, [u16]>,
    /// For each entry of `verify`, its literal's byte after the prefix, or 0
    /// when the literal is no longer than the prefix: most literals that
    /// share a prefix differ from the text right there, and this byte rules
    /// them out without reading the literal.
    pub verify_next: Cow<'static, [u8]>,
    /// For the `k`th match state and `q` below [`FOLLOW`],
    /// `follow_masks[follow[FOLLOW * k + q]]`: the classes (bit `class % 64`)
    /// of the `q`th byte after the prefix in its literals, every bit where a
    /// literal ends sooner. A prefix match whose next bytes do not all fit
    /// their masks is no literal's, and the
    /// walk goes on without a call to verify it: most prefix matches in a
    /// log are common words (`http`, `work`, `rate`) that no literal
    /// continues as the text does.
    /// Few masks are distinct (687 of the shipped 4,288), so each is
    /// stored once and named by a 16-bit index.
    pub follow: Cow<'static, [u16]>,
    pub follow_masks: Cow<'static, [u64]>,
    /// The literals, concatenated; literal `p` is `bytes[end(p - 1)..end(p)]`.
    pub literal_bytes: Cow<'static, [u8]>,
    /// The low 16 bits of each literal's end ([`Automaton::literal_end`]).
    pub literal_ends: Cow<'static, [u16]>,
    /// The literals whose end is the first past a multiple of 65,536: a
    /// literal is at most 65,535 bytes, so the ends' high bits count how
    /// many of these come at or before it (the shipped tables have one).
    pub literal_wraps: Cow<'static, [u32]>,
}

/// What a row's value in [`Automaton::trans`] is multiplied by to give
/// its offset: rows are padded to a multiple of this many classes.
pub const SCALE: usize = 8;

/// The transition table: 16-bit values when every row offset and match
/// state fits in them (the shipped tables, whose 16-bit table takes half
/// the bytes a 32-bit one would), 32-bit otherwise.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Trans {
    Narrow(Cow<'static, [u16]>),
    Wide(Cow<'static, [u32]>),
}

impl Trans {
    pub fn len(&self) -> usize {
        match self {
            Trans::Narrow(t) => t.len(),
            Trans::Wide(t) => t.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The piece of a text marker that the automaton holds: the marker cut at
/// its `#`s (each stands for a digit run), the longest piece, the first of
/// equally long ones. Its index among the pieces, and the piece.
pub fn anchor(marker: &str) -> (usize, &str) {
    let mut best = (0, "");
    for (i, piece) in marker.split('#').enumerate() {
        if piece.len() > best.1.len() {
            best = (i, piece);
        }
    }
    best
}

/// Builds the automaton of `literals`, which must be lower-case: the scan
/// matches them ASCII-case-insensitively.
/// Fails when there are more than 65,535 literals or the automaton would
/// need more than 65,535 states, or when a literal is empty or longer than
/// 65,535 bytes.
pub fn build(literals: &[&[u8]]) -> Result<Automaton, String> {
    use aho_corasick::automaton::Automaton as _;
    use aho_corasick::{dfa::DFA, Anchored, MatchKind, StartKind};

    if literals.len() > u16::MAX as usize {
        return Err(format!("{} literals, at most {} fit", literals.len(), u16::MAX));
    }
    if let Some(p) = literals.iter().position(|l| l.is_empty() || l.len() > u16::MAX as usize) {
        return Err(format!("literal {p} is empty or longer than {} bytes", u16::MAX));
    }
    let (prefixes, groups) = prefix_groups(literals);
    let dfa = DFA::builder()
        .match_kind(MatchKind::Standard)
        .start_kind(StartKind::Unanchored)
        .build(&prefixes)
        .map_err(|e| format!("the prefix automaton does not build: {e}"))?;
    let (classes, classes_len, reps) = byte_classes(&prefixes);
    // A row is padded to a multiple of SCALE classes, so every row offset
    // is a multiple of SCALE and is stored divided by it.
    let stride = classes_len.next_multiple_of(SCALE);
    let start = dfa.start_state(Anchored::No).map_err(|e| e.to_string())?;
    let next = |sid, byte| dfa.next_state(Anchored::No, sid, byte);
    let order = states(start, &reps, next, |sid| dfa.is_match(sid));
    if order.len() > u16::MAX as usize {
        return Err(format!("the prefix automaton needs {} states, at most {} fit", order.len(), u16::MAX));
    }
    let first_match = order.iter().position(|&s| dfa.is_match(s)).unwrap_or(order.len());
    let (rows, resume) = rows(&order, first_match, &reps, next);
    let id = |i: usize| match i < first_match {
        true => (i * stride / SCALE) as u32,
        false => (rows.len() * stride / SCALE + i - first_match) as u32,
    };
    let index: std::collections::HashMap<_, u32> = order.iter().enumerate().map(|(i, &s)| (s, id(i))).collect();
    let mut trans = Vec::with_capacity(rows.len() * stride);
    for &sid in &rows {
        trans.extend(reps.iter().map(|&b| index[&next(sid, b)]));
        trans.resize(trans.len() + stride - classes_len, 0);
    }
    let resume: Vec<u16> = resume.iter().map(|&r| u16::try_from(r).expect("fewer rows than states")).collect();
    let (mut match_ends, mut verify) = (Vec::new(), Vec::new());
    for &sid in &order[first_match..] {
        for k in 0..dfa.match_len(sid) {
            verify.extend(groups[dfa.match_pattern(sid, k).as_usize()].iter().copied());
        }
        match_ends.push(u16::try_from(verify.len()).expect("fewer than 65,536 literals to verify"));
    }
    let verify_next: Vec<u8> = verify.iter().map(|&p| literals[p as usize].get(PREFIX).copied().unwrap_or(0)).collect();
    let (follow, follow_masks) = follow_masks(literals, &match_ends, &verify, &classes)?;
    let literal_bytes: Vec<u8> = literals.concat();
    let (mut literal_ends, mut literal_wraps, mut end) = (Vec::with_capacity(literals.len()), Vec::new(), 0u64);
    for (p, l) in literals.iter().enumerate() {
        let next = end + l.len() as u64;
        if next >> 16 != end >> 16 {
            literal_wraps.push(u32::try_from(p).expect("fewer than 65,536 literals"));
        }
        literal_ends.push(next as u16);
        end = next;
    }
    Ok(Automaton {
        classes: Cow::Owned(classes),
        stride,
        trans: match trans.iter().all(|&t| t <= u16::MAX as u32) {
            true => Trans::Narrow(Cow::Owned(trans.iter().map(|&t| t as u16).collect())),
            false => Trans::Wide(Cow::Owned(trans)),
        },
        start: index[&start] * SCALE as u32,
        first_match: (rows.len() * stride / SCALE) as u32,
        resume: Cow::Owned(resume),
        match_ends: Cow::Owned(match_ends),
        verify: Cow::Owned(verify),
        verify_next: Cow::Owned(verify_next),
        follow: Cow::Owned(follow),
        follow_masks: Cow::Owned(follow_masks),
        literal_bytes: Cow::Owned(literal_bytes),
        literal_ends: Cow::Owned(literal_ends),
        literal_wraps: Cow::Owned(literal_wraps),
    })
}

/// The states that get a row, and for each match state the row it goes on
/// from ([`Automaton::resume`]): every state before `first_match` (the
/// states that are not match states), then a row for each match state whose
/// transitions no earlier row has.
fn rows<S: Copy + Eq + std::hash::Hash>(
    order: &[S],
    first_match: usize,
    reps: &[u8],
    next: impl Fn(S, u8) -> S,
) -> (Vec<S>, Vec<usize>) {
    let mut rows = order[..first_match].to_vec();
    let transitions = |sid: S| reps.iter().map(|&b| next(sid, b)).collect::<Vec<S>>();
    let mut by_transitions: std::collections::HashMap<Vec<S>, usize> =
        rows.iter().enumerate().map(|(i, &sid)| (transitions(sid), i)).collect();
    let mut resume = Vec::with_capacity(order.len() - first_match);
    for &sid in &order[first_match..] {
        let r = *by_transitions.entry(transitions(sid)).or_insert_with(|| {
            rows.push(sid);
            rows.len() - 1
        });
        resume.push(r);
    }
    (rows, resume)
}

/// [`Automaton::follow`]: [`FOLLOW`] masks for each match state, of the
/// classes of the bytes at `PREFIX`, `PREFIX + 1` … in its literals (all ones
/// for a literal that ends before that byte), as indexes into the distinct masks.
fn follow_masks(
    literals: &[&[u8]],
    match_ends: &[u16],
    verify: &[u16],
    classes: &[u8; 256],
) -> Result<(Vec<u16>, Vec<u64>), String> {
    let bit = |lit: &[u8], at: usize| lit.get(at).map_or(u64::MAX, |&b| 1 << (classes[b as usize] % 64));
    let (mut from, mut masks) = (0, Vec::new());
    let mut known: std::collections::HashMap<u64, u16> = std::collections::HashMap::new();
    let mut follow = Vec::with_capacity(match_ends.len() * FOLLOW);
    for &to in match_ends {
        let group = verify[from..to as usize].iter().map(|&p| literals[p as usize]);
        for at in PREFIX..PREFIX + FOLLOW {
            let mask = group.clone().fold(0, |m, lit| m | bit(lit, at));
            let index = match known.get(&mask) {
                Some(&i) => i,
                None => {
                    let i = u16::try_from(masks.len()).map_err(|_| "more than 65,536 distinct follow masks")?;
                    known.insert(mask, i);
                    masks.push(mask);
                    i
                }
            };
            follow.push(index);
        }
        from = to as usize;
    }
    Ok((follow, masks))
}

/// The distinct prefixes, and for each the literals (by index) that start with it.
fn prefix_groups<'a>(literals: &[&'a [u8]]) -> (Vec<&'a [u8]>, Vec<Vec<u16>>) {
    let mut prefixes: Vec<&[u8]> = Vec::new();
    let mut groups: Vec<Vec<u16>> = Vec::new();
    let mut seen = std::collections::HashMap::new();
    for (p, lit) in literals.iter().enumerate() {
        let prefix = &lit[..lit.len().min(PREFIX)];
        let g = *seen.entry(prefix).or_insert_with(|| {
            prefixes.push(prefix);
            groups.push(Vec::new());
            groups.len() - 1
        });
        groups[g].push(p as u16);
    }
    (prefixes, groups)
}

/// The byte classes: 0 for bytes in no prefix, then one per byte that is in
/// one, in byte order. Also the number of classes and a representative byte
/// of each.
fn byte_classes(prefixes: &[&[u8]]) -> ([u8; 256], usize, Vec<u8>) {
    let mut used = [false; 256];
    for p in prefixes {
        for &b in p.iter() {
            used[b as usize] = true;
        }
    }
    let mut classes = [0u8; 256];
    // Class 0's representative is a byte no prefix holds (there is one: at
    // most 255 bytes can be used before the classes no longer fit a u8).
    let other = (0..=255u8).find(|&b| !used[b as usize]).unwrap_or(0);
    let mut reps = vec![other];
    for b in 0..=255u8 {
        if used[b as usize] {
            classes[b as usize] = reps.len() as u8;
            reps.push(b);
        }
    }
    for b in b'A'..=b'Z' {
        classes[b as usize] = classes[b.to_ascii_lowercase() as usize];
    }
    (classes, reps.len(), reps)
}

/// The states reachable from `start`, breadth first, non-match states first.
fn states<S: Copy + Eq + std::hash::Hash>(
    start: S,
    reps: &[u8],
    next: impl Fn(S, u8) -> S,
    is_match: impl Fn(S) -> bool,
) -> Vec<S> {
    let mut seen = std::collections::HashSet::from([start]);
    let mut order = vec![start];
    let mut i = 0;
    while i < order.len() {
        for &b in reps {
            let n = next(order[i], b);
            if seen.insert(n) {
                order.push(n);
            }
        }
        i += 1;
    }
    order.sort_by_key(|&s| is_match(s));
    order
}

impl Automaton {
    /// How many literals the automaton holds.
    pub fn len(&self) -> usize {
        self.literal_ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.literal_ends.is_empty()
    }

    /// Where literal `p` ends in [`Automaton::literal_bytes`].
    pub fn literal_end(&self, p: usize) -> usize {
        let high = self.literal_wraps.partition_point(|&w| w as usize <= p);
        (high << 16) | usize::from(self.literal_ends[p])
    }

    /// Literal `p`.
    pub fn literal(&self, p: usize) -> &[u8] {
        let start = if p == 0 { 0 } else { self.literal_end(p - 1) };
        &self.literal_bytes[start..self.literal_end(p)]
    }

    /// Calls `hit(literal, start, end)` for every occurrence of every literal
    /// in `hay`, in any ASCII case, overlapping ones included, in order of the
    /// end of their prefix.
    pub fn scan(&self, hay: &[u8], mut hit: impl FnMut(usize, usize, usize)) {
        match &self.trans {
            Trans::Narrow(t) => self.walk(t, hay, &mut hit),
            Trans::Wide(t) => self.walk(t, hay, &mut hit),
        }
    }

    fn walk<T: Copy + Into<u32>>(&self, trans: &[T], hay: &[u8], hit: &mut impl FnMut(usize, usize, usize)) {
        let (mut at, mut state) = (0, self.start as usize);
        while let Some((end, next, k)) = self.advance(trans, hay, at, state) {
            self.verify_at(k, hay, end, hit);
            (at, state) = (end, next);
        }
    }

    /// Walks `hay` from `at` in `state` to the next match state whose
    /// literals may continue as the text does ([`Automaton::follow`]): the
    /// end of the prefix, the row to go on from and the match number; `None` at the end
    /// of `hay`. It calls nothing, so in the component, where a call keeps
    /// few values in registers, the walk keeps its tables in registers.
    #[inline(never)]
    fn advance<T: Copy + Into<u32>>(
        &self,
        trans: &[T],
        hay: &[u8],
        mut at: usize,
        mut state: usize,
    ) -> Option<(usize, usize, usize)> {
        let classes = &*self.classes;
        loop {
            at = self.to_match(trans, hay, at, &mut state)?;
            let k = state - self.first_match as usize;
            state = usize::from(self.resume[k]) * self.stride;
            // The match state's four mask indexes and the four bytes after
            // the prefix, each read with one bounds check. Past the end any
            // byte will do (a literal that needs a byte there cannot match,
            // and one that ends sooner has every bit).
            let follow = &self.follow[FOLLOW * k..FOLLOW * k + FOLLOW];
            let next: [u8; FOLLOW] = hay
                .get(at..at + FOLLOW)
                .and_then(|bytes| bytes.try_into().ok())
                .unwrap_or_else(|| std::array::from_fn(|q| hay.get(at + q).copied().unwrap_or(0)));
            let mask = |q: usize| self.follow_masks[usize::from(follow[q])] >> (classes[next[q] as usize] % 64);
            if (0..FOLLOW).fold(1, |fits, q| fits & mask(q)) != 0 {
                return Some((at, state, k));
            }
        }
    }

    /// The transitions alone, from `at` to just after the byte that reaches
    /// a match state, or `None` at the end of `hay`. Eight bytes a round:
    /// one loop test (and, in the component, one interruption check) per
    /// round rather than per byte.
    #[inline(always)]
    fn to_match<T: Copy + Into<u32>>(
        &self,
        trans: &[T],
        hay: &[u8],
        mut at: usize,
        state: &mut usize,
    ) -> Option<usize> {
        let (classes, first_match) = (&*self.classes, self.first_match as usize);
        // One byte's step: the next row's offset, or the match state itself
        // (and `true`) when the byte reaches one.
        let step = |state: &mut usize, b: u8| {
            let value = trans[*state + classes[b as usize] as usize].into() as usize;
            let matched = value >= first_match;
            *state = if matched { value } else { value * SCALE };
            matched
        };
        while let Some(chunk) = hay.get(at..at + 8) {
            for (j, &b) in chunk.iter().enumerate() {
                if step(state, b) {
                    return Some(at + j + 1);
                }
            }
            at += 8;
        }
        for (j, &b) in hay.get(at..)?.iter().enumerate() {
            if step(state, b) {
                return Some(at + j + 1);
            }
        }
        None
    }

    /// Compares the rest of each literal whose prefix ends at `end` (the
    /// automaton has matched the prefix itself).
    #[inline(never)]
    fn verify_at(&self, k: usize, hay: &[u8], end: usize, hit: &mut impl FnMut(usize, usize, usize)) {
        let from = if k == 0 { 0 } else { self.match_ends[k - 1] as usize };
        let to = self.match_ends[k] as usize;
        let after = &hay[end..];
        let next = after.first().map_or(0, u8::to_ascii_lowercase);
        for (&p, &want) in self.verify[from..to].iter().zip(&self.verify_next[from..to]) {
            if want != 0 && want != next {
                continue;
            }
            let lit = self.literal(p as usize);
            let (prefix, rest) = lit.split_at(lit.len().min(PREFIX));
            if after.len() >= rest.len() && after[..rest.len()].eq_ignore_ascii_case(rest) {
                hit(p as usize, end - prefix.len(), end + rest.len());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aho_corasick::{AhoCorasick, MatchKind};
    use proptest::prelude::*;

    /// Every (literal, start, end) the automaton reports, sorted.
    fn ours(a: &Automaton, hay: &[u8]) -> Vec<(usize, usize, usize)> {
        let mut out = Vec::new();
        a.scan(hay, |p, s, e| out.push((p, s, e)));
        out.sort();
        out
    }

    /// The same from aho-corasick's own overlapping search: the reference.
    fn reference(literals: &[&[u8]], hay: &[u8]) -> Vec<(usize, usize, usize)> {
        overlapping(&insensitive(literals), hay)
    }

    fn insensitive<P: AsRef<[u8]>>(literals: &[P]) -> AhoCorasick {
        AhoCorasick::builder().match_kind(MatchKind::Standard).ascii_case_insensitive(true).build(literals).unwrap()
    }

    fn overlapping(ac: &AhoCorasick, hay: &[u8]) -> Vec<(usize, usize, usize)> {
        let mut out: Vec<_> =
            ac.find_overlapping_iter(hay).map(|m| (m.pattern().as_usize(), m.start(), m.end())).collect();
        out.sort();
        out
    }

    fn shipped_literals() -> Vec<Vec<u8>> {
        crate::markers::tables()
            .markers()
            .filter(|m| crate::markers::is_text(m.kind))
            .map(|m| anchor(&m.marker).1.as_bytes().to_vec())
            .collect()
    }

    #[test]
    fn finds_what_aho_corasick_finds_in_real_texts() {
        let owned = shipped_literals();
        let literals: Vec<&[u8]> = owned.iter().map(Vec::as_slice).collect();
        let a = build(&literals).unwrap();
        // Each follow mask is stored once: the masks of each of the shipped
        // literals' match states take a few hundred distinct values.
        let distinct: std::collections::HashSet<u64> = a.follow_masks.iter().copied().collect();
        assert_eq!(distinct.len(), a.follow_masks.len(), "no mask is stored twice");
        assert!(a.follow_masks.len() * 4 < a.follow.len(), "{} masks for {}", a.follow_masks.len(), a.follow.len());
        let ac = insensitive(&literals);
        let corpus = [
            include_str!("../tests/corpus/dev.jsonl"),
            include_str!("../tests/corpus/working.jsonl"),
            include_str!("../tests/corpus/held-back.jsonl"),
        ];
        let mut hits = 0;
        for line in corpus.iter().flat_map(|c| c.lines()) {
            let expected = overlapping(&ac, line.as_bytes());
            hits += expected.len();
            assert_eq!(ours(&a, line.as_bytes()), expected, "{line}");
        }
        assert!(hits > 1000, "the corpus holds many literals ({hits})");
    }

    /// A prefix match whose next bytes no literal of its group
    /// continues with is passed over without a verification; one that may
    /// continue stops the walk for one.
    #[test]
    fn the_walk_stops_only_where_a_literal_may_continue() {
        // Where the walk of `literals`' automaton over `hay` first stops to verify.
        fn first_stop(literals: &[&[u8]], hay: &[u8]) -> Option<usize> {
            let a = build(literals).unwrap();
            let Trans::Narrow(trans) = &a.trans else { panic!("a small automaton is narrow") };
            a.advance(trans, hay, 0, a.start as usize).map(|(end, _, _)| end)
        }
        let stops = |hay: &[u8]| first_stop(&[b"abcdef", b"abcdgh", b"efgh"], hay);
        assert_eq!(stops(b"xabcdefx"), Some(5), "abcd then e f: abcdef may follow");
        assert_eq!(stops(b"xabcdghx"), Some(5), "abcd then g h: abcdgh may follow");
        // Each mask holds the bytes of every literal of the group at its
        // position, so only a byte that no literal has there rules a match out.
        assert_eq!(stops(b"xabcdaax"), None, "abcd then a a: no literal continues so");
        assert_eq!(stops(b"xabcd"), None, "abcd at the end: every literal is longer");
        assert_eq!(stops(b"efgh"), Some(4), "efgh is a whole literal");
        // The test reaches FOLLOW bytes past the prefix: a word that begins as
        // a literal does and parts from it at its fourth byte is passed over.
        let stops = |hay: &[u8]| first_stop(&[b"abcdefgh", b"efgh"], hay);
        assert_eq!(stops(b"xabcdefgax"), None, "abcd then e f g a: abcdefgh parts at its last byte");
        assert_eq!(stops(b"xabcdefghx"), Some(5), "abcd then e f g h: abcdefgh may follow");
    }

    /// A match state at the end of a prefix borrows the row of the state of
    /// its longest suffix; one that a longer prefix goes on from (`ab` in
    /// `abcd`) gets a row of its own.
    #[test]
    fn match_states_borrow_rows_unless_a_prefix_goes_on() {
        let a = build(&[b"abcd", b"bcdx"]).unwrap();
        // Rows: start, a, ab, abc, b, bc, bcd; `abcd` moves as `bcd` and
        // `bcdx` as the start state.
        assert_eq!((a.trans.len() / a.stride, a.resume.len()), (7, 2));
        assert_eq!(ours(&a, b"abcdx"), vec![(0, 0, 4), (1, 1, 5)]);
        let a = build(&[b"ab", b"abcd"]).unwrap();
        assert_eq!((a.trans.len() / a.stride, a.resume.len()), (4, 2), "start, a, abc and a row for ab");
        assert_eq!(ours(&a, b"xabcd ab"), vec![(0, 1, 3), (0, 6, 8), (1, 1, 5)]);
    }

    #[test]
    fn literals_past_64_kib_read_back_whole() {
        let long: Vec<Vec<u8>> = (0..4u8).map(|i| [&b"x"[..], &vec![b'a' + i; 39_999]].concat()).collect();
        let refs: Vec<&[u8]> = long.iter().map(Vec::as_slice).collect();
        let a = build(&refs).unwrap();
        assert_eq!(a.literal_wraps[..], [1, 3], "ends 80,000 and 160,000 pass 65,536 and 131,072");
        for (p, l) in long.iter().enumerate() {
            assert_eq!(a.literal(p), &l[..], "literal {p}");
        }
        assert_eq!(ours(&a, &long[3]), vec![(3, 0, 40_000)]);
    }

    /// Rows are stored divided by [`SCALE`], so a 16-bit table holds more
    /// rows than 65,536 entries: here 1,837 rows of 40 entries (38 classes).
    #[test]
    fn a_narrow_table_holds_more_rows_than_its_offsets_would() {
        let words: Vec<Vec<u8>> = (0..900u32)
            .map(|i| {
                let d = |k: u32| b"abcdefghijklmnopqrstuvwxyz0123456789"[(i / 36u32.pow(k) % 36) as usize];
                vec![d(0), d(1), d(2), b'-', d(0), b'!']
            })
            .collect();
        let refs: Vec<&[u8]> = words.iter().map(Vec::as_slice).collect();
        let a = build(&refs).unwrap();
        let Trans::Narrow(trans) = &a.trans else { panic!("the table is narrow") };
        assert!(trans.len() > usize::from(u16::MAX), "{} entries: offsets alone would not fit", trans.len());
        let hay: Vec<u8> = words.iter().rev().step_by(7).flat_map(|w| [&w[..], b" x"].concat()).collect();
        assert_eq!(ours(&a, &hay), reference(&refs, &hay));
        assert_eq!(ours(&a, &hay).len(), words.len().div_ceil(7));
    }

    #[test]
    fn refuses_what_does_not_fit() {
        assert!(build(&[b"ok", b""]).unwrap_err().contains("literal 1 is empty"));
        let many: Vec<Vec<u8>> = (0..70_000u32).map(|i| format!("{i:x}").into_bytes()).collect();
        let many: Vec<&[u8]> = many.iter().map(Vec::as_slice).collect();
        assert!(build(&many).unwrap_err().contains("at most 65535 fit"));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Random texts stitched from pieces of the literals (so that prefixes
        /// meet without their literals, and literals overlap) and noise.
        #[test]
        fn finds_what_aho_corasick_finds_in_stitched_texts(
            picks in proptest::collection::vec((any::<proptest::sample::Index>(), 0usize..24, 0usize..24, "[a-zA-Z :0-9]{0,3}"), 1..40),
            upper in proptest::collection::vec(any::<bool>(), 64),
        ) {
            static SHIPPED: std::sync::LazyLock<(Vec<Vec<u8>>, Automaton, AhoCorasick)> = std::sync::LazyLock::new(|| {
                let owned = shipped_literals();
                let a = build(&owned.iter().map(Vec::as_slice).collect::<Vec<_>>()).unwrap();
                let ac = insensitive(&owned);
                (owned, a, ac)
            });
            let literals: Vec<&[u8]> = SHIPPED.0.iter().map(Vec::as_slice).collect();
            let mut hay = Vec::new();
            for (i, from, len, noise) in picks {
                let lit = literals[i.index(literals.len())];
                let from = from.min(lit.len());
                let piece = &lit[from..(from + len).min(lit.len())];
                // Some pieces in capitals: the walk is case-insensitive.
                let at = hay.len();
                hay.extend(piece.iter().enumerate().map(|(j, b)| if upper[(at + j) % 64] { b.to_ascii_uppercase() } else { *b }));
                hay.extend_from_slice(noise.as_bytes());
            }
            prop_assert_eq!(ours(&SHIPPED.1, &hay), overlapping(&SHIPPED.2, &hay));
        }

        /// Arbitrary small literal sets, including prefixes of each other and
        /// literals shorter than the prefix.
        #[test]
        fn any_literal_set_agrees(
            lits in proptest::collection::vec("[ab:#]{1,7}", 1..12),
            hay in "[abAB:# ]{0,200}",
        ) {
            let mut lits = lits;
            lits.sort();
            lits.dedup();
            let literals: Vec<&[u8]> = lits.iter().map(|l| l.as_bytes()).collect();
            let a = build(&literals).unwrap();
            prop_assert_eq!(ours(&a, hay.as_bytes()), reference(&literals, hay.as_bytes()));
        }
    }
}
