//! A small CSV reader: a header row naming the columns, then one record a
//! line (fields split at commas, `"…"` quoting with `""` for a quote), blank
//! lines and `#` comment lines skipped. Every field access names the file,
//! the line and the column in its error.

use crate::{Source, TraceError};

/// The most data rows a trace may hold (the Philly trace has 82,247).
pub const MAX_ROWS: usize = 5_000_000;

/// A table: its columns and its rows with their lines.
pub(crate) struct Table<'a> {
    file: &'a str,
    columns: Vec<String>,
    rows: Vec<(u64, Vec<String>)>,
}

/// One row, read field by field.
pub(crate) struct Row<'t> {
    file: &'t str,
    line: u64,
    columns: &'t [String],
    fields: &'t [String],
}

impl<'a> Table<'a> {
    /// Reads `source`; its header must name every column of `required`.
    pub(crate) fn read(source: Source<'a>, required: &[&str]) -> Result<Table<'a>, TraceError> {
        let file = source.name;
        let mut lines = source
            .text
            .lines()
            .enumerate()
            .map(|(i, l)| (i as u64 + 1, l.trim_end_matches('\r')))
            .filter(|(_, l)| !l.trim().is_empty() && !l.starts_with('#'));
        let Some((header_line, header)) = lines.next() else {
            return Err(TraceError::File {
                file: file.to_string(),
                message: "empty: no header row".to_string(),
            });
        };
        let columns: Vec<String> = split(header, file, header_line)?
            .into_iter()
            .map(|c| c.trim().to_string())
            .collect();
        for want in required {
            if !columns.iter().any(|c| c == want) {
                return Err(TraceError::Row {
                    file: file.to_string(),
                    line: header_line,
                    message: format!(
                        "the header has no column `{want}` (it has: {})",
                        columns.join(", ")
                    ),
                });
            }
        }
        let mut rows = Vec::new();
        for (line, text) in lines {
            if rows.len() >= MAX_ROWS {
                return Err(TraceError::File {
                    file: file.to_string(),
                    message: format!("more than {MAX_ROWS} rows"),
                });
            }
            let fields = split(text, file, line)?;
            if fields.len() != columns.len() {
                return Err(TraceError::Row {
                    file: file.to_string(),
                    line,
                    message: format!(
                        "{} fields, the header has {} columns",
                        fields.len(),
                        columns.len()
                    ),
                });
            }
            rows.push((line, fields));
        }
        Ok(Table {
            file,
            columns,
            rows,
        })
    }

    /// Whether the header has `column`.
    pub(crate) fn has(&self, column: &str) -> bool {
        self.columns.iter().any(|c| c == column)
    }

    /// The rows, in file order.
    pub(crate) fn rows(&self) -> impl Iterator<Item = Row<'_>> {
        self.rows.iter().map(|(line, fields)| Row {
            file: self.file,
            line: *line,
            columns: &self.columns,
            fields,
        })
    }
}

impl Row<'_> {
    /// Its line.
    pub(crate) fn line(&self) -> u64 {
        self.line
    }

    /// The trimmed field of `column` (empty when the header lacks it).
    pub(crate) fn get(&self, column: &str) -> &str {
        self.columns
            .iter()
            .position(|c| c == column)
            .and_then(|i| self.fields.get(i))
            .map_or("", |f| f.trim())
    }

    /// The field of `column`, `None` when empty.
    pub(crate) fn optional(&self, column: &str) -> Option<&str> {
        Some(self.get(column)).filter(|f| !f.is_empty())
    }

    /// An error about `column` of this row.
    pub(crate) fn error(&self, column: &str, message: impl Into<String>) -> TraceError {
        TraceError::Field {
            file: self.file.to_string(),
            line: self.line,
            field: column.to_string(),
            message: message.into(),
        }
    }

    /// The field of `column` as a decimal number.
    pub(crate) fn number(&self, column: &str) -> Result<f64, TraceError> {
        let text = self.get(column);
        if text.is_empty() {
            return Err(self.error(column, "empty"));
        }
        text.parse::<f64>()
            .map_err(|_| self.error(column, format!("`{text}` is not a number")))
    }

    /// The field of `column` as a whole number in `min..=max`.
    pub(crate) fn count(&self, column: &str, min: u64, max: u64) -> Result<u64, TraceError> {
        let text = self.get(column);
        if text.is_empty() {
            return Err(self.error(column, "empty"));
        }
        let value: u64 = text
            .parse()
            .map_err(|_| self.error(column, format!("`{text}` is not a whole number")))?;
        if value < min || value > max {
            return Err(self.error(column, format!("{value} is not within {min}..={max}")));
        }
        Ok(value)
    }
}

/// Splits one CSV line into fields.
fn split(line: &str, file: &str, number: u64) -> Result<Vec<String>, TraceError> {
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut chars = line.chars().peekable();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (false, '"') if field.trim().is_empty() => {
                field.clear();
                quoted = true;
            }
            (false, ',') => fields.push(std::mem::take(&mut field)),
            (_, c) => field.push(c),
        }
    }
    if quoted {
        return Err(TraceError::Row {
            file: file.to_string(),
            line: number,
            message: "a quoted field is not closed".to_string(),
        });
    }
    fields.push(field);
    Ok(fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> Result<Table<'_>, TraceError> {
        Table::read(
            Source {
                name: "t.csv",
                text,
            },
            &["a"],
        )
    }

    #[test]
    fn reads_quotes_comments_and_blank_lines() {
        let t = table("# c\na,b\n\n\"x,1\",\"say \"\"hi\"\"\"\n").unwrap();
        let row = t.rows().next().unwrap();
        assert_eq!(row.line(), 4);
        assert_eq!(row.get("a"), "x,1");
        assert_eq!(row.get("b"), "say \"hi\"");
    }

    #[test]
    fn errors_name_file_line_and_field() {
        let e = table("a,b\n1\n").err().unwrap();
        assert_eq!(e.to_string(), "t.csv:2: 1 fields, the header has 2 columns");
        let e = table("b\n1\n").err().unwrap();
        assert!(
            e.to_string()
                .starts_with("t.csv:1: the header has no column `a`")
        );
        let t = table("a\n-3\n").unwrap();
        let e = t.rows().next().unwrap().count("a", 1, 8).err().unwrap();
        assert_eq!(
            e.to_string(),
            "t.csv:2: field `a`: `-3` is not a whole number"
        );
        assert!(table("").is_err());
        assert!(table("a\n\"x\n").is_err());
    }
}
