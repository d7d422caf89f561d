//! Checks the decoder against LLVM's disassembly of the ISA coverage corpus (the workspace's
//! `tests/fixtures/isa_corpus`, gfx1100 and gfx1030, the gfx1030 words decoded into gfx11
//! instructions): every instruction of every listing is decoded from its code object, rendered
//! in LLVM's syntax from the decoder's fields ([`llvm_syntax`](super::llvm_syntax)) and must read
//! exactly as `llvm-objdump` printed it, whitespace aside — the mnemonic with its encoding suffix,
//! every register, inline constant, literal, source and output modifier, op_sel, offset, cache
//! flag, SDWA selection, VOPD half and SOPP/SOPK immediate — and a branch must reach the address
//! the listing names. Every word of every listing is compared; none is left out. The corpus
//! test (the workspace's `tests/sim_isa_corpus.rs`) checks offsets, sizes and mnemonics of the
//! kernels' code ranges and which opcodes the interpreter executes.

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::path::Path;

    use object::{Object, ObjectSegment};

    use super::super::llvm_syntax::render;
    use super::super::validate::decode_at;

    /// A code object's load image: its segments laid out by virtual address, the addresses
    /// `llvm-objdump` prints.
    fn load_image(elf: &[u8]) -> Vec<u8> {
        let file = object::File::parse(elf).unwrap();
        let mut image = Vec::new();
        for segment in file.segments() {
            let (start, size) = (segment.address() as usize, segment.size() as usize);
            if image.len() < start + size {
                image.resize(start + size, 0);
            }
            let data = segment.data().unwrap();
            image[start..start + data.len()].copy_from_slice(data);
        }
        image
    }

    /// One instruction of a listing.
    struct Listed {
        address: u64,
        /// The instruction as printed, mnemonic and operands.
        text: String,
        /// Its dwords.
        words: usize,
        /// For branches, the target as `<symbol+0x50>`, resolved to an address.
        target: Option<u64>,
    }

    /// The instructions of an `llvm-objdump -d` listing: `text // address: dwords [<target>]`
    /// lines, with the symbol lines (`0000000000001800 <integer>:`) giving branch targets their
    /// addresses.
    fn parse_listing(listing: &str) -> Vec<Listed> {
        let mut symbols: HashMap<&str, u64> = HashMap::new();
        for line in listing.lines() {
            if let Some((address, rest)) = line.split_once(" <") {
                if let (Ok(address), Some(symbol)) =
                    (u64::from_str_radix(address, 16), rest.strip_suffix(">:"))
                {
                    symbols.insert(symbol, address);
                }
            }
        }
        let mut out = Vec::new();
        for line in listing.lines() {
            let Some((text, comment)) = line.split_once("//") else { continue };
            let Some((address, rest)) = comment.trim().split_once(':') else { continue };
            let Ok(address) = u64::from_str_radix(address.trim(), 16) else { continue };
            let mut fields = rest.split_whitespace().peekable();
            let mut words = 0;
            while fields.next_if(|w| w.len() == 8 && u32::from_str_radix(w, 16).is_ok()).is_some() {
                words += 1;
            }
            let target = fields.next().map(|t| {
                let t = t.trim_start_matches('<').trim_end_matches('>');
                let (symbol, offset) = t.split_once('+').unwrap_or((t, "0x0"));
                let offset = u64::from_str_radix(offset.trim_start_matches("0x"), 16).unwrap();
                symbols.get(symbol).unwrap_or_else(|| panic!("no symbol {symbol}")) + offset
            });
            out.push(Listed { address, text: text.trim().to_string(), words, target });
        }
        out
    }

    /// LLVM's text with single spaces, as the rendering spaces it.
    fn normalise(text: &str) -> String {
        text.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    /// The operands and modifiers in a listed instruction: the tokens after each mnemonic,
    /// separated by commas or spaces outside brackets and parentheses (`offset:16`, `clamp`,
    /// `op_sel:[0,0,1]`, `-|v1|` and `instid0(VALU_DEP_1)` are one each; `|` between
    /// `s_delay_alu` fields is none), each half of a dual instruction counted alike.
    fn count_operands(text: &str) -> usize {
        text.split(" :: ")
            .map(|part| {
                let Some((_, operands)) = part.trim().split_once(' ') else { return 0 };
                let mut depth = 0i32;
                let mut tokens = vec![String::new()];
                for c in operands.chars() {
                    match c {
                        '[' | '(' => depth += 1,
                        ']' | ')' => depth -= 1,
                        _ => {}
                    }
                    if depth == 0 && (c == ',' || c.is_whitespace()) {
                        tokens.push(String::new());
                    } else {
                        tokens.last_mut().unwrap().push(c);
                    }
                }
                tokens.iter().filter(|t| !t.is_empty() && *t != "|").count()
            })
            .sum()
    }

    /// What the check of one target found.
    #[derive(Debug, Default)]
    struct Tally {
        instructions: usize,
        /// Dwords in the listings, and those of the instructions compared.
        listed_words: usize,
        words: usize,
        operands: usize,
        branches: usize,
        not_compared: Vec<String>,
    }

    /// Compares every instruction of the corpus listings of `target` with the decoder's
    /// rendering.
    fn check(target: &str, gfx: pm4::Gfx) -> Tally {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/isa_corpus").join(target);
        let mut paths: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "dis"))
            .collect();
        paths.sort();
        assert!(paths.len() >= 10, "the corpus listings are missing: {}", dir.display());
        let mut tally = Tally::default();
        let mut wrong = Vec::new();
        for listing in paths {
            let file = listing.file_name().unwrap().to_string_lossy().into_owned();
            let image = load_image(&std::fs::read(listing.with_extension("co")).unwrap());
            for listed in parse_listing(&std::fs::read_to_string(&listing).unwrap()) {
                let at = listed.address;
                tally.listed_words += listed.words;
                let here = format!("{target}/{file} at {at:#x}: llvm-objdump `{}`", listed.text);
                let rendered = match decode_at(gfx, &image, at) {
                    Ok(d) if usize::from(d.size) != 4 * listed.words => {
                        wrong.push(format!("{here}: the decoder reads {} bytes", d.size));
                        continue;
                    }
                    Ok(d) => render(gfx, &d, at),
                    Err(e) => {
                        tally.not_compared.push(format!("{here}: the decoder refuses it ({e:?})"));
                        continue;
                    }
                };
                let Some(rendered) = rendered else {
                    tally.not_compared.push(format!("{here}: the decoder names no instruction"));
                    continue;
                };
                tally.instructions += 1;
                tally.words += listed.words;
                tally.operands += count_operands(&listed.text);
                let want = normalise(&listed.text);
                if rendered.text != want {
                    wrong.push(format!("{here}\n    decoder `{}`", rendered.text));
                }
                if rendered.branch_target.is_some() || listed.target.is_some() {
                    tally.branches += 1;
                    if rendered.branch_target != listed.target {
                        wrong.push(format!(
                            "{here}: branch target {:x?}, llvm-objdump {:x?}",
                            rendered.branch_target, listed.target
                        ));
                    }
                }
            }
        }
        eprintln!(
            "{target}: {} instructions, {} words, {} operands and modifiers, {} branch targets compared; {} not compared",
            tally.instructions,
            tally.words,
            tally.operands,
            tally.branches,
            tally.not_compared.len()
        );
        assert!(
            wrong.is_empty(),
            "{target}: {} instructions disagree with llvm-objdump:\n{}",
            wrong.len(),
            wrong.iter().take(200).cloned().collect::<Vec<_>>().join("\n")
        );
        tally
    }

    #[test]
    fn listing_operands_are_counted() {
        assert_eq!(count_operands("s_endpgm"), 0);
        assert_eq!(count_operands("v_add_f32_e32 v4, v4, v5"), 3);
        assert_eq!(count_operands("global_store_b64 v[5:6], v[7:8], off offset:16"), 4);
        assert_eq!(count_operands("v_and_b16 v11.h, v12.l, 3 op_sel:[0,0,1]"), 4);
        assert_eq!(count_operands("v_dual_mov_b32 v1, 0 :: v_dual_mov_b32 v4, s8"), 4);
        assert_eq!(
            count_operands("s_delay_alu instid0(VALU_DEP_1) | instskip(NEXT) | instid1(VALU_DEP_1)"),
            3
        );
        assert_eq!(count_operands("s_waitcnt vmcnt(0) expcnt(0) lgkmcnt(0)"), 3);
    }

    /// Every word of the target's listings was compared: none refused or unnamed by the decoder.
    fn assert_all_compared(tally: &Tally) {
        assert_eq!(tally.not_compared, Vec::<String>::new(), "instructions not compared");
        assert_eq!(tally.words, tally.listed_words, "words not compared");
        assert!(tally.words > 10_000, "only {} words in the listings", tally.words);
    }

    #[test]
    fn the_decoder_agrees_with_llvm_objdump_on_every_gfx1100_operand() {
        assert_all_compared(&check("gfx1100", pm4::Gfx::Gfx11));
    }

    #[test]
    fn the_decoder_agrees_with_llvm_objdump_on_every_gfx1030_operand() {
        assert_all_compared(&check("gfx1030", pm4::Gfx::Gfx10_3));
    }
}
