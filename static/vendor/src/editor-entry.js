// The submit page's YAML editor: CodeMirror 6 with YAML colouring, line numbers and error
// markers, bundled into one file (static/vendor/codemirror-yaml.min.js, see static/vendor/README.md).
// It exposes window.GpuEditor; static/portal/submit.js uses only that.
import {EditorView, keymap, lineNumbers, highlightActiveLine, highlightActiveLineGutter,
  highlightSpecialChars, drawSelection} from "@codemirror/view";
import {EditorState, Compartment} from "@codemirror/state";
import {syntaxHighlighting, defaultHighlightStyle, indentOnInput, bracketMatching, indentUnit} from "@codemirror/language";
import {history, defaultKeymap, historyKeymap, indentWithTab} from "@codemirror/commands";
import {setDiagnostics, lintGutter, lintKeymap} from "@codemirror/lint";
import {yaml} from "@codemirror/lang-yaml";

const theme = EditorView.theme({
  "&": {fontSize: "13px", border: "1px solid #dde3ea", borderRadius: "4px", background: "#fff"},
  "&.cm-focused": {outline: "2px solid #2d6a8f55"},
  ".cm-content": {fontFamily: "ui-monospace, Menlo, monospace", minHeight: "22em"},
  ".cm-gutters": {fontFamily: "ui-monospace, Menlo, monospace", background: "#f5f7fa", borderRight: "1px solid #dde3ea"},
  ".cm-scroller": {maxHeight: "36em", overflow: "auto"},
});

// 1-based line and column -> a range in the document: from the column to the end of its word
// (a whole line when no column is known), clamped to the document.
function range(doc, line, column) {
  const l = doc.line(Math.min(Math.max(line || 1, 1), doc.lines));
  if (!column) return {from: l.from, to: l.to};
  const from = Math.min(l.from + column - 1, l.to);
  const rest = doc.sliceString(from, l.to);
  const word = rest.match(/^\S+/);
  return {from, to: word ? from + word[0].length : l.to};
}

function create(textarea, options) {
  const opts = options || {};
  const readOnly = new Compartment();
  let quiet = false; // set while the page itself replaces the text
  const view = new EditorView({
    state: EditorState.create({
      doc: textarea.value,
      extensions: [
        lineNumbers(), highlightActiveLineGutter(), highlightSpecialChars(), history(), drawSelection(),
        indentOnInput(), indentUnit.of("  "), bracketMatching(), highlightActiveLine(),
        syntaxHighlighting(defaultHighlightStyle, {fallback: true}), yaml(), lintGutter(), theme,
        keymap.of([...defaultKeymap, ...historyKeymap, ...lintKeymap, indentWithTab]),
        EditorView.contentAttributes.of({"aria-label": opts.label || "Task YAML", spellcheck: "false"}),
        readOnly.of(EditorState.readOnly.of(false)),
        EditorView.updateListener.of((update) => {
          if (!update.docChanged) return;
          textarea.value = update.state.doc.toString(); // a plain form post still carries the text
          if (!quiet && opts.onChange) opts.onChange(textarea.value);
        }),
      ],
    }),
  });
  textarea.after(view.dom);
  textarea.hidden = true;
  // The editable element takes the textarea's id, so labels and tests find the editor there.
  if (textarea.id) {
    view.contentDOM.id = textarea.id;
    textarea.id = `${textarea.id}-source`;
  }
  return {
    view,
    getValue: () => view.state.doc.toString(),
    setValue(text, {silent = false} = {}) {
      quiet = silent;
      try {
        view.dispatch({changes: {from: 0, to: view.state.doc.length, insert: text}});
      } finally {
        quiet = false;
      }
    },
    // [{line, column, message, severity}] -> markers in the gutter and under the text.
    setDiagnostics(list) {
      const doc = view.state.doc;
      const diagnostics = (list || []).filter((d) => d.line).map((d) => ({
        ...range(doc, d.line, d.column), severity: d.severity || "error", message: d.message,
      }));
      view.dispatch(setDiagnostics(view.state, diagnostics));
      return diagnostics.length;
    },
    goTo(line, column) {
      const {from} = range(view.state.doc, line, column);
      view.dispatch({selection: {anchor: from}, scrollIntoView: true});
      view.focus();
    },
    focus: () => view.focus(),
  };
}

window.GpuEditor = {create};
