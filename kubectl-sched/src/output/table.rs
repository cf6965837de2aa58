//! What every command's table shares: kubectl's columns and counted nouns.

/// Columns separated by three spaces, as kubectl prints them; no trailing blanks.
pub fn columns(headers: &[String], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }
    let mut out = String::new();
    for row in std::iter::once(headers).chain(rows.iter().map(Vec::as_slice)) {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 < row.len() {
                let pad = widths[i].saturating_sub(cell.chars().count());
                line.push_str(cell);
                line.push_str(&" ".repeat(pad + 3));
            } else {
                line.push_str(cell);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// `1 pod`, `2 pods`.
pub fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_pad_all_but_the_last() {
        let got = columns(
            &["A".into(), "BB".into(), "C".into()],
            &[
                vec!["xxx".into(), "y".into(), "z".into()],
                vec!["x".into(), String::new(), String::new()],
            ],
        );
        assert_eq!(got, "A     BB   C\nxxx   y    z\nx\n");
    }
}
