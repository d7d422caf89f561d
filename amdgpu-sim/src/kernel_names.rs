//! Names the kernel a dispatch runs, for error messages. The command processor only sees a code
//! address; the backend uploads a code object's load image, whose first segment starts with the
//! ELF header, so the dynamic symbol table is reachable through PT_DYNAMIC. Each `<name>.kd`
//! symbol is a kernel descriptor whose entry offset (at byte 16) leads to the kernel's first
//! instruction: the one that lands on the code address names the kernel. Anything else (raw
//! code, a stripped image) yields `None` and the caller names the address instead.

const ELF_MAGIC: &[u8; 4] = b"\x7fELF";
const PT_DYNAMIC: u32 = 2;
const DT_NULL: u64 = 0;
const DT_HASH: u64 = 4;
const DT_STRTAB: u64 = 5;
const DT_SYMTAB: u64 = 6;
const DT_STRSZ: u64 = 10;
const SYM_SIZE: u64 = 24;
/// Refuse to walk absurd tables (a corrupt image must not make an error message slow).
const MAX_SYMBOLS: u64 = 1 << 16;

fn u16_at(b: &[u8], at: u64) -> Option<u16> {
    let at = usize::try_from(at).ok()?;
    Some(u16::from_le_bytes(b.get(at..at.checked_add(2)?)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: u64) -> Option<u32> {
    let at = usize::try_from(at).ok()?;
    Some(u32::from_le_bytes(b.get(at..at.checked_add(4)?)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: u64) -> Option<u64> {
    let at = usize::try_from(at).ok()?;
    Some(u64::from_le_bytes(b.get(at..at.checked_add(8)?)?.try_into().ok()?))
}

/// The kernel whose entry point is at `entry_offset` in `image` (a load image placed at its
/// mapping's start), if the image says.
pub fn kernel_at(image: &[u8], entry_offset: u64) -> Option<String> {
    if image.get(..4)? != ELF_MAGIC || *image.get(4)? != 2 {
        return None;
    }
    let phoff = u64_at(image, 0x20)?;
    let phentsize = u64::from(u16_at(image, 0x36)?);
    let phnum = u64::from(u16_at(image, 0x38)?);
    let dynamic = (0..phnum).find_map(|i| {
        let ph = phoff.checked_add(i.checked_mul(phentsize)?)?;
        (u32_at(image, ph)? == PT_DYNAMIC)
            .then(|| Some((u64_at(image, ph + 0x10)?, u64_at(image, ph + 0x28)?)))?
    })?;
    let (dyn_addr, dyn_size) = dynamic;
    let (mut symtab, mut strtab, mut strsz, mut hash) = (None, None, None, None);
    for i in 0..dyn_size / 16 {
        let at = dyn_addr.checked_add(i * 16)?;
        let (tag, value) = (u64_at(image, at)?, u64_at(image, at + 8)?);
        match tag {
            DT_NULL => break,
            DT_SYMTAB => symtab = Some(value),
            DT_STRTAB => strtab = Some(value),
            DT_STRSZ => strsz = Some(value),
            DT_HASH => hash = Some(value),
            _ => {}
        }
    }
    let (symtab, strtab) = (symtab?, strtab?);
    // DT_HASH's nchain is the symbol count; without it, .dynstr follows .dynsym in lld's layout.
    let count = match hash {
        Some(h) => u64::from(u32_at(image, h + 4)?),
        None => strtab.checked_sub(symtab)? / SYM_SIZE,
    }
    .min(MAX_SYMBOLS);
    let strings = image.get(usize::try_from(strtab).ok()?..)?;
    let strings = match strsz.and_then(|n| usize::try_from(n).ok()) {
        Some(n) => strings.get(..n)?,
        None => strings,
    };
    (1..count).find_map(|i| {
        let sym = symtab.checked_add(i * SYM_SIZE)?;
        let name_at = usize::try_from(u32_at(image, sym)?).ok()?;
        let value = u64_at(image, sym + 8)?;
        let raw = strings.get(name_at..)?;
        let name = std::str::from_utf8(&raw[..raw.iter().position(|&c| c == 0)?]).ok()?;
        let kernel = name.strip_suffix(".kd")?;
        let entry = value.checked_add_signed(u64_at(image, value.checked_add(16)?)? as i64)?;
        (entry == entry_offset).then(|| kernel.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_code_and_garbage_have_no_name() {
        assert_eq!(kernel_at(&[0u8; 64], 0), None);
        let mut elf = vec![0u8; 64];
        elf[..4].copy_from_slice(ELF_MAGIC);
        elf[4] = 2;
        elf[0x20..0x28].copy_from_slice(&u64::MAX.to_le_bytes());
        elf[0x38] = 1;
        assert_eq!(kernel_at(&elf, 0), None);
    }
}
