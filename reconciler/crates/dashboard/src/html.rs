//! A tiny HTML writer whose only way to add text is escaped: fleet names,
//! reasons and error messages are untrusted (they come from commits), so
//! markup can be added only from `&'static str` literals, and everything
//! else goes through [`escape`].

use std::fmt::Write as _;

/// `text` made inert in HTML text and in quoted attribute values: control
/// and bidirectional characters escaped as `model::text` does for
/// terminals, then `&`, `<`, `>`, `"` and `'` as character references.
pub fn escape(text: &str) -> String {
    let visible = model::text::escape_controls(text);
    let mut out = String::with_capacity(visible.len());
    for c in visible.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// An HTML document being written.
#[derive(Debug, Default)]
pub struct Html {
    out: String,
}

impl Html {
    /// An empty document.
    pub fn new() -> Html {
        Html::default()
    }

    /// Markup from a literal (never from data).
    pub fn raw(&mut self, markup: &'static str) -> &mut Self {
        self.out.push_str(markup);
        self
    }

    /// Text, escaped.
    pub fn text(&mut self, text: &str) -> &mut Self {
        self.out.push_str(&escape(text));
        self
    }

    /// An integer.
    pub fn int(&mut self, n: u64) -> &mut Self {
        let _ = write!(self.out, "{n}");
        self
    }

    /// `<tag>` + escaped text + `</tag>`; `tag` is a literal.
    pub fn element(&mut self, tag: &'static str, text: &str) -> &mut Self {
        let _ = write!(self.out, "<{tag}>{}</{tag}>", escape(text));
        self
    }

    /// ` name="value"` with the value escaped; `name` is a literal.
    pub fn attr(&mut self, name: &'static str, value: &str) -> &mut Self {
        let _ = write!(self.out, " {name}=\"{}\"", escape(value));
        self
    }

    /// The document.
    pub fn finish(self) -> String {
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_in_data_is_inert() {
        assert_eq!(
            escape("<script>alert('x')</script> & \"q\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"
        );
    }

    #[test]
    fn controls_and_bidi_overrides_are_shown_not_obeyed() {
        let shown = escape("a\u{1b}[31mb\u{202e}c");
        assert!(
            !shown.contains('\u{1b}') && !shown.contains('\u{202e}'),
            "{shown}"
        );
        assert!(shown.contains("\\u{1b}"), "{shown}");
    }

    #[test]
    fn elements_and_attributes_escape_their_data() {
        let mut h = Html::new();
        h.raw("<td")
            .attr("title", "\"><b>")
            .raw(">")
            .element("code", "<i>");
        assert_eq!(
            h.finish(),
            "<td title=\"&quot;&gt;&lt;b&gt;\"><code>&lt;i&gt;</code>"
        );
    }
}
