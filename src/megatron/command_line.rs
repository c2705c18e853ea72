//! The parallelism arguments out of a whole pasted Megatron-LM command line
//! or launch script, read as bash reads its words.

use crate::error::{Error, Result};
use crate::megatron::args::{ArgType, Handling, MegatronArg, MegatronArgs, MegatronValue};

/// The characters that end a word outside quotes and are words of their
/// own (bash's metacharacters other than blanks).
const OPERATORS: [char; 7] = [';', '&', '|', '(', ')', '<', '>'];

/// Splits shell text into words as bash does before expanding them: blanks
/// separate words; `;`, `&`, `|`, `(`, `)`, `<` and `>` end a word and are
/// words of their own; a `#` that starts a word begins a comment to the end
/// of the line; single quotes keep everything; double quotes keep all but
/// `\"`, `\\`, `\$`, `` \` `` and a backslash-newline; a backslash outside
/// quotes escapes the next character, and before a newline joins lines.
/// `$(...)`, `${...}` and `` `...` `` stay whole, unexpanded, in their
/// word. A word that starts with `--` and holds blanks (`"--fp8-format
/// hybrid"`, an element of a bash array that `${ARGS[@]}` splits) is split
/// at them.
///
/// # Errors
/// [`Error::InvalidArgument`] for an unterminated quote, `$(`, `${` or
/// backquote.
fn words(text: &str) -> Result<Vec<String>> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('\n') | None => {}
                Some('\r') if chars.peek() == Some(&'\n') => {
                    chars.next();
                }
                Some(next) => {
                    word.push(next);
                    in_word = true;
                }
            },
            '#' if !in_word => {
                for ch in chars.by_ref() {
                    if ch == '\n' {
                        break;
                    }
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(ch) => word.push(ch),
                        None => return Err(unterminated(text)),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.peek() {
                            Some('"' | '\\' | '$' | '`') => {
                                if let Some(ch) = chars.next() {
                                    word.push(ch);
                                }
                            }
                            Some('\n') => {
                                chars.next();
                            }
                            _ => word.push('\\'),
                        },
                        Some('$') => dollar(&mut chars, &mut word, text)?,
                        Some('`') => backquote(&mut chars, &mut word, text)?,
                        Some(ch) => word.push(ch),
                        None => return Err(unterminated(text)),
                    }
                }
            }
            '$' => {
                in_word = true;
                dollar(&mut chars, &mut word, text)?;
            }
            '`' => {
                in_word = true;
                backquote(&mut chars, &mut word, text)?;
            }
            c if OPERATORS.contains(&c) => {
                if in_word {
                    out.push(std::mem::take(&mut word));
                    in_word = false;
                }
                out.push(c.to_string());
            }
            c if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            c => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        out.push(word);
    }
    Ok(out
        .into_iter()
        .flat_map(|w| {
            if w.starts_with("--") && w.contains(char::is_whitespace) {
                w.split_whitespace().map(str::to_owned).collect()
            } else {
                vec![w]
            }
        })
        .collect())
}

type Chars<'a> = std::iter::Peekable<std::str::Chars<'a>>;

/// After a `$`: a `$(...)` or `${...}` whole (nested brackets and quotes
/// inside skipped over), else just the `$`.
fn dollar(chars: &mut Chars<'_>, word: &mut String, text: &str) -> Result<()> {
    word.push('$');
    let (open, close) = match chars.peek() {
        Some('(') => ('(', ')'),
        Some('{') => ('{', '}'),
        _ => return Ok(()),
    };
    let mut depth = 0usize;
    while let Some(c) = chars.next() {
        word.push(c);
        match c {
            c if c == open => depth += 1,
            c if c == close => {
                depth -= 1;
                if depth == 0 {
                    return Ok(());
                }
            }
            '\\' => {
                if let Some(next) = chars.next() {
                    word.push(next);
                }
            }
            '\'' | '"' => loop {
                match chars.next() {
                    Some(ch) => {
                        word.push(ch);
                        if ch == c {
                            break;
                        }
                    }
                    None => return Err(unterminated(text)),
                }
            },
            _ => {}
        }
    }
    Err(unterminated(text))
}

/// After a backquote: the command up to the closing one, kept whole.
fn backquote(chars: &mut Chars<'_>, word: &mut String, text: &str) -> Result<()> {
    word.push('`');
    while let Some(c) = chars.next() {
        word.push(c);
        match c {
            '`' => return Ok(()),
            '\\' => {
                if let Some(next) = chars.next() {
                    word.push(next);
                }
            }
            _ => {}
        }
    }
    Err(unterminated(text))
}

fn unterminated(text: &str) -> Error {
    let shown: String = text.chars().take(60).collect();
    Error::InvalidArgument {
        name: "megatron_args".into(),
        value: shown,
        expected: "a command line whose quotes, $(...), ${...} and backquotes are closed",
    }
}

/// Whether `word` holds an expansion the shell would have made (`$TP`,
/// `${TP}`, `$((2*4))`, a backquoted command).
fn unexpanded(word: &str) -> bool {
    word.contains('$') || word.contains('`')
}

/// The value word of an argument as an integer, or the error naming the
/// flag and the word.
fn int(arg: &MegatronArg, word: &str) -> Result<i64> {
    let bad = |expected| Error::InvalidArgument {
        name: arg.flag.to_owned(),
        value: word.to_owned(),
        expected,
    };
    if unexpanded(word) {
        return Err(bad(
            "an integer (the pasted text is read as written, not expanded: give the value, or paste the command as it ran, e.g. from bash -x)",
        ));
    }
    if arg.name == "nproc_per_node" && ["auto", "cpu", "gpu", "xpu"].contains(&word.trim()) {
        return Err(bad(
            "a number of processes (auto, cpu, gpu and xpu count the devices of the machine torchrun runs on: give the number)",
        ));
    }
    if arg.name == "nnodes" {
        if let Some((min, max)) = word.split_once(':') {
            return match (min.trim().parse::<i64>(), max.trim().parse::<i64>()) {
                (Ok(a), Ok(b)) if a == b => Ok(a),
                (Ok(_), Ok(_)) => Err(bad(
                    "a number of nodes (a range MIN:MAX is an elastic launch, whose world size is not fixed: give the number of nodes it runs on)",
                )),
                _ => Err(bad("a number of nodes, or a range MIN:MAX")),
            };
        }
    }
    word.trim().parse::<i64>().map_err(|_| bad("an integer"))
}

/// The shell variable a word only expands (`$NAME`, `${NAME}`,
/// `${NAME[@]}`, `${NAME[*]}`): its name.
fn variable(word: &str) -> Option<&str> {
    let rest = word.strip_prefix('$')?;
    let name = match rest.strip_prefix('{') {
        Some(inner) => {
            let inner = inner.strip_suffix('}')?;
            inner
                .strip_suffix("[@]")
                .or_else(|| inner.strip_suffix("[*]"))
                .unwrap_or(inner)
        }
        None => rest,
    };
    is_name(name).then_some(name)
}

/// A shell variable name: letters, digits and `_`, not starting with a digit.
fn is_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The variable a word assigns (`NAME=...`, `NAME+=(`), if any.
fn assigned(word: &str) -> Option<&str> {
    let (name, _) = word.split_once('=')?;
    let name = name.strip_suffix('+').unwrap_or(name);
    is_name(name).then_some(name)
}

impl MegatronArgs {
    /// The parallelism arguments of a pasted Megatron-LM command line or
    /// launch script (`torchrun ... pretrain_gpt.py
    /// --tensor-model-parallel-size 8 --pipeline-model-parallel-size 4
    /// ...`), its words read as bash reads them: quotes, `\`-newline line
    /// continuations, `#` comments (a word starting with `#`, outside
    /// quotes, to the end of the line), `;`, `&`, `|`, `(`, `)`, `<`, `>`
    /// between words, and no expansion.
    ///
    /// Arguments are read wherever they appear as words, a later one
    /// replacing an earlier one: in a bash array's definition
    /// (`MODEL_PARALLEL_ARGS=( --tensor-model-parallel-size 2 )`) as on the
    /// command line, and an array element holding several words
    /// (`"--fp8-format hybrid"`) is split as `${ARGS[@]}` splits it. Flags
    /// take their value as the next word or after `=`;
    /// `--hierarchical-context-parallel-sizes` takes every following
    /// integer; `--use-tp-pp-dp-mapping` takes none. torchrun's
    /// `--nproc-per-node` (or `--nproc_per_node`) times `--nnodes` is the
    /// world size. Arguments of [`MEGATRON_ARGS`](crate::megatron::MEGATRON_ARGS)
    /// that do not change the groups and every argument not in it are
    /// ignored; [`given`](Self::given) lists the arguments used and
    /// [`unexpanded`](Self::unexpanded) the variables used as arguments
    /// but not defined in the text.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the flag and the word, for a
    /// parallelism flag without an integer value (`--tensor-model-parallel-size
    /// $TP`: the text is not expanded), a value out of range, torchrun's
    /// `--nnodes MIN:MAX` range or `--nproc-per-node gpu`, or an
    /// unterminated quote; [`Error::UnmodelledArgument`] for an argument
    /// that changes the groups in a way rank-layout does not model
    /// (`--hybrid-context-parallel`); the errors of
    /// [`config`](Self::config) (a weight-shard count tp does not divide,
    /// torchrun's world size and `--world-size` differing).
    ///
    /// ```
    /// use rank_layout::megatron::MegatronArgs;
    /// let line = "torchrun --nproc-per-node 8 --nnodes 2 pretrain_gpt.py \\\n  --tensor-model-parallel-size 4 --lr 3e-4 \\\n  --pipeline-model-parallel-size=2 --use-tp-pp-dp-mapping \\\n  # --context-parallel-size 2";
    /// let args = MegatronArgs::parse_command_line(line)?;
    /// let used: Vec<&str> = args.given().map(|(a, _)| a.name).collect();
    /// assert_eq!(used, ["nproc_per_node", "nnodes", "tensor_model_parallel_size", "pipeline_model_parallel_size", "use_tp_pp_dp_mapping"]);
    /// let config = args.config()?;
    /// assert_eq!((config.tp, config.pp, config.cp, config.world_size), (4, 2, 1, Some(16)));
    /// assert_eq!(config.order.to_string(), "tp-cp-ep-pp-dp");
    /// assert!(MegatronArgs::parse_command_line("--tensor-model-parallel-size $TP").is_err());
    /// assert!(MegatronArgs::parse_command_line("--hybrid-context-parallel").is_err());
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    pub fn parse_command_line(text: &str) -> Result<MegatronArgs> {
        MegatronArgs::parse_split(words(text)?)
    }

    /// The parallelism arguments of a command line already split into
    /// words (a program's `argv`, Python's `sys.argv`): as
    /// [`parse_command_line`](Self::parse_command_line), without the
    /// shell's quoting or comments (each word is taken as it is).
    ///
    /// # Errors
    /// As [`parse_command_line`](Self::parse_command_line), but for quotes.
    ///
    /// ```
    /// use rank_layout::megatron::MegatronArgs;
    /// let argv = ["pretrain_gpt.py", "--data-path", "my data's dir", "--tensor-model-parallel-size", "4"];
    /// assert_eq!(MegatronArgs::parse_words(&argv)?.config()?.tp, 4);
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    pub fn parse_words<S: AsRef<str>>(words: &[S]) -> Result<MegatronArgs> {
        MegatronArgs::parse_split(words.iter().map(|w| w.as_ref().to_owned()).collect())
    }

    /// The arguments of words split as bash splits them.
    fn parse_split(words: Vec<String>) -> Result<MegatronArgs> {
        let defined: Vec<&str> = words.iter().filter_map(|w| assigned(w)).collect();
        let mut args = MegatronArgs::new();
        let mut missing: Vec<String> = Vec::new();
        let mut i = 0;
        while let Some(word) = words.get(i) {
            i += 1;
            let Some(flag) = word.strip_prefix("--") else {
                // A variable used as arguments (not as the value of a
                // flag before it, nor in a test or an echo), defined
                // nowhere in the text.
                let not_arguments = i >= 2
                    && words.get(i - 2).is_some_and(|w| {
                        (w.starts_with('-') && !w.contains('='))
                            || ["[[", "[", "==", "!=", "=", "echo", "printf"].contains(&w.as_str())
                    });
                if let Some(name) = variable(word) {
                    if !not_arguments && !defined.contains(&name) && !missing.contains(word) {
                        missing.push(word.clone());
                    }
                }
                continue;
            };
            let (name, inline) = match flag.split_once('=') {
                Some((name, value)) => (name, Some(value)),
                None => (flag, None),
            };
            let Some(arg) = MegatronArg::find(name) else {
                continue;
            };
            match arg.handling {
                Handling::Modelled | Handling::Separate => {}
                Handling::Model => {
                    let value = model_value(arg, inline, words.get(i));
                    if inline.is_none() && arg.takes != ArgType::Flag && value.is_some() {
                        i += 1;
                    }
                    if let Some(value) = value {
                        args.set(arg.name, value)?;
                    }
                    continue;
                }
                Handling::Refused => {
                    return Err(Error::UnmodelledArgument {
                        flag: arg.flag,
                        why: arg.meaning,
                    });
                }
                _ => continue,
            }
            let value = match arg.takes {
                ArgType::Flag => match inline {
                    Some(v) => MegatronValue::Bool(!matches!(
                        v.to_ascii_lowercase().as_str(),
                        "false" | "0" | "no"
                    )),
                    None => MegatronValue::Bool(true),
                },
                ArgType::Ints => {
                    let mut list = Vec::new();
                    if let Some(v) = inline {
                        list.push(int(arg, v)?);
                    }
                    while let Some(next) = words.get(i) {
                        if next.starts_with("--") {
                            break;
                        }
                        match next.parse::<i64>() {
                            Ok(n) => list.push(n),
                            // A variable would have expanded to more sizes.
                            Err(_) if list.is_empty() || unexpanded(next) => {
                                return Err(Error::InvalidArgument {
                                    name: arg.flag.to_owned(),
                                    value: next.clone(),
                                    expected: if unexpanded(next) {
                                        "integers (the pasted text is read as written, not expanded: give the values)"
                                    } else {
                                        "integers"
                                    },
                                });
                            }
                            Err(_) => break,
                        }
                        i += 1;
                    }
                    if list.is_empty() {
                        return Err(Error::InvalidArgument {
                            name: arg.flag.to_owned(),
                            value: String::new(),
                            expected: "one or more integers after the flag",
                        });
                    }
                    MegatronValue::Ints(list)
                }
                _ => {
                    let word = match inline {
                        Some(v) => v,
                        None => {
                            let next = words.get(i).ok_or_else(|| Error::InvalidArgument {
                                name: arg.flag.to_owned(),
                                value: String::new(),
                                expected: "a value after the flag",
                            })?;
                            i += 1;
                            next.as_str()
                        }
                    };
                    match arg.takes {
                        ArgType::Text if unexpanded(word) => {
                            return Err(Error::InvalidArgument {
                                name: arg.flag.to_owned(),
                                value: word.to_owned(),
                                expected: "a spec (the pasted text is read as written, not expanded: give the value)",
                            });
                        }
                        ArgType::Text => MegatronValue::Text(word.to_owned()),
                        _ => MegatronValue::Int(int(arg, word)?),
                    }
                }
            };
            args.set(arg.name, value)?;
        }
        args.check()?;
        args.set_unexpanded(missing);
        Ok(args)
    }
}

/// The value of a model argument as written: a switch is `true`, or
/// `false` when its flag turns the named argument off
/// (`--disable-bias-linear` sets `add_bias_linear`) or its inline value
/// says so; otherwise the inline value or the next word (not a flag), an
/// integer when it reads as one, else text. Nothing is refused here: a
/// model argument is judged by what reads it.
fn model_value(
    arg: &MegatronArg,
    inline: Option<&str>,
    next: Option<&String>,
) -> Option<MegatronValue> {
    if arg.takes == ArgType::Flag {
        let on =
            inline.is_none_or(|v| !matches!(v.to_ascii_lowercase().as_str(), "false" | "0" | "no"));
        let inverted = arg.flag.trim_start_matches('-').replace('-', "_") != arg.name;
        return Some(MegatronValue::Bool(on != inverted));
    }
    let word = match inline {
        Some(v) => v,
        None => next.map(String::as_str).filter(|w| !w.starts_with("--"))?,
    };
    Some(match word.parse::<i64>() {
        Ok(n) => MegatronValue::Int(n),
        Err(_) => MegatronValue::Text(word.to_owned()),
    })
}

#[cfg(test)]
mod tests {
    use super::{variable, words};

    #[test]
    fn shell_words() {
        assert_eq!(
            words("a 'b c' \"d \\\" e\" f\\ g \\\nh").unwrap(),
            vec!["a", "b c", "d \" e", "f g", "h"]
        );
        assert!(words("a 'b").is_err());
        assert!(words("").unwrap().is_empty());
    }

    #[test]
    fn comments_start_words_outside_quotes() {
        assert_eq!(
            words("a # b c\nd e#f '#g' \"h #i\" ;#j\nk").unwrap(),
            vec!["a", "d", "e#f", "#g", "h #i", ";", "k"]
        );
        // A continuation before a comment line, and CRLF line ends.
        assert_eq!(words("a \\\r\n  # b \\\n c").unwrap(), vec!["a", "c"]);
    }

    #[test]
    fn operators_and_substitutions() {
        assert_eq!(
            words("ARGS=(--pp 4) && x=$(( 2 * 4 )) ${A[@]} \"${B:-\"x y\"}\" `c d`|e").unwrap(),
            vec![
                "ARGS=",
                "(",
                "--pp",
                "4",
                ")",
                "&",
                "&",
                "x=$(( 2 * 4 ))",
                "${A[@]}",
                "${B:-\"x y\"}",
                "`c d`",
                "|",
                "e"
            ]
        );
        assert!(words("a $(b").is_err());
        assert!(words("a ${b").is_err());
        assert!(words("a `b").is_err());
    }

    #[test]
    fn array_elements_holding_flags_are_split() {
        assert_eq!(
            words("\"--fp8-format hybrid\" \"--data-path $D\" 'a b'").unwrap(),
            vec!["--fp8-format", "hybrid", "--data-path", "$D", "a b"]
        );
    }

    #[test]
    fn variables() {
        assert_eq!(variable("$GPT_ARGS"), Some("GPT_ARGS"));
        assert_eq!(variable("${MODEL_ARGS[@]}"), Some("MODEL_ARGS"));
        assert_eq!(variable("${X}"), Some("X"));
        assert_eq!(variable("$(ls)"), None);
        assert_eq!(variable("${X:-1}"), None);
        assert_eq!(variable("a$X"), None);
    }
}
