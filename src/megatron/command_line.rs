//! The parallelism arguments out of a whole pasted Megatron-LM command line.

use crate::error::{Error, Result};
use crate::megatron::args::{ArgType, MegatronArg, MegatronArgs, MegatronValue};

/// Splits a shell command line into words: blanks separate words, single
/// quotes keep everything, double quotes keep all but `\"` and `\\`, a
/// backslash outside quotes escapes the next character, and a backslash
/// before a newline joins lines.
///
/// # Errors
/// [`Error::InvalidArgument`] for an unterminated quote.
fn words(text: &str) -> Result<Vec<String>> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('\n') | None => {}
                Some(next) => {
                    word.push(next);
                    in_word = true;
                }
            },
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
                        Some('\\') if matches!(chars.peek(), Some('"' | '\\')) => {
                            if let Some(ch) = chars.next() {
                                word.push(ch);
                            }
                        }
                        Some(ch) => word.push(ch),
                        None => return Err(unterminated(text)),
                    }
                }
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
    Ok(out)
}

fn unterminated(text: &str) -> Error {
    let shown: String = text.chars().take(60).collect();
    Error::InvalidArgument {
        name: "megatron_args".into(),
        value: shown,
        expected: "a command line whose quotes are closed",
    }
}

/// An integer word, or the error naming the flag and the word.
fn int(arg: &MegatronArg, word: &str) -> Result<i64> {
    word.trim()
        .parse::<i64>()
        .map_err(|_| Error::InvalidArgument {
            name: arg.flag.to_owned(),
            value: word.to_owned(),
            expected: "an integer",
        })
}

impl MegatronArgs {
    /// The parallelism arguments of a pasted Megatron-LM command line
    /// (`torchrun ... pretrain_gpt.py --tensor-model-parallel-size 8
    /// --pipeline-model-parallel-size 4 ...`, line continuations and quotes
    /// as a shell reads them). Flags take their value as the next word or
    /// after `=`; `--hierarchical-context-parallel-sizes` takes every
    /// following integer; `--use-tp-pp-dp-mapping` takes none. Every other
    /// word and flag is ignored; [`given`](Self::given) lists the
    /// arguments used.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the flag and the word, for a
    /// parallelism flag without an integer value (`--tensor-model-parallel-size
    /// $TP`), a value out of range, or an unterminated quote.
    ///
    /// ```
    /// use rank_layout::megatron::MegatronArgs;
    /// let line = "torchrun --nproc-per-node 8 pretrain_gpt.py \\\n  --tensor-model-parallel-size 4 --lr 3e-4 \\\n  --pipeline-model-parallel-size=2 --use-tp-pp-dp-mapping";
    /// let args = MegatronArgs::parse_command_line(line)?;
    /// let used: Vec<&str> = args.given().map(|(a, _)| a.name).collect();
    /// assert_eq!(used, ["tensor_model_parallel_size", "pipeline_model_parallel_size", "use_tp_pp_dp_mapping"]);
    /// let config = args.config()?;
    /// assert_eq!((config.tp, config.pp, config.order.to_string().as_str()), (4, 2, "tp-cp-ep-pp-dp"));
    /// assert!(MegatronArgs::parse_command_line("--tensor-model-parallel-size $TP").is_err());
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    pub fn parse_command_line(text: &str) -> Result<MegatronArgs> {
        MegatronArgs::parse_words(&words(text)?)
    }

    /// The parallelism arguments of a command line already split into
    /// words (a program's `argv`, Python's `sys.argv`): as
    /// [`parse_command_line`](Self::parse_command_line), without the
    /// shell's quoting (each word is taken as it is).
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
        let mut args = MegatronArgs::new();
        let mut i = 0;
        while let Some(word) = words.get(i).map(AsRef::as_ref) {
            i += 1;
            let Some(flag) = word.strip_prefix("--") else {
                continue;
            };
            let (name, inline) = match flag.split_once('=') {
                Some((name, value)) => (name, Some(value)),
                None => (flag, None),
            };
            let Some(arg) = MegatronArg::find(name) else {
                continue;
            };
            let value = match arg.takes {
                ArgType::Flag => match inline {
                    Some(v) => MegatronValue::Bool(!matches!(
                        v.to_ascii_lowercase().as_str(),
                        "false" | "0" | "no"
                    )),
                    None => MegatronValue::Bool(true),
                },
                ArgType::Int => {
                    let word = match inline {
                        Some(v) => v,
                        None => {
                            let next = words.get(i).ok_or_else(|| Error::InvalidArgument {
                                name: arg.flag.to_owned(),
                                value: String::new(),
                                expected: "an integer after the flag",
                            })?;
                            i += 1;
                            next.as_ref()
                        }
                    };
                    MegatronValue::Int(int(arg, word)?)
                }
                ArgType::Ints => {
                    let mut list = Vec::new();
                    if let Some(v) = inline {
                        list.push(int(arg, v)?);
                    }
                    while let Some(next) = words.get(i).map(AsRef::as_ref) {
                        if next.starts_with("--") {
                            break;
                        }
                        match next.parse::<i64>() {
                            Ok(n) => list.push(n),
                            Err(_) if list.is_empty() => {
                                return Err(Error::InvalidArgument {
                                    name: arg.flag.to_owned(),
                                    value: next.to_owned(),
                                    expected: "integers",
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
            };
            args.set(arg.name, value)?;
        }
        Ok(args)
    }
}

#[cfg(test)]
mod tests {
    use super::words;

    #[test]
    fn shell_words() {
        assert_eq!(
            words("a 'b c' \"d \\\" e\" f\\ g \\\nh").unwrap(),
            vec!["a", "b c", "d \" e", "f g", "h"]
        );
        assert!(words("a 'b").is_err());
        assert!(words("").unwrap().is_empty());
    }
}
