//! `--param key=value` parsing shared by every model.
//!
//! Each model declares a table of [`ParamSpec`]s (name, default, help). A
//! name that is not in the table is an error that lists the valid names; a
//! value that does not parse is an error that says what was expected.

use crate::ModelError;

/// One tunable parameter of a model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParamSpec {
    /// The name `--param` uses.
    pub name: &'static str,
    /// The value in force when the parameter is not given.
    pub default: &'static str,
    /// One line for the CLI's help.
    pub help: &'static str,
}

/// The `tick_ms` parameter as most models declare it.
pub(crate) const TICK_MS: ParamSpec = ParamSpec {
    name: "tick_ms",
    default: "100",
    help: "simulated milliseconds per tick in the scenario file",
};

/// The `ttl` parameter as most models declare it.
pub(crate) const TTL: ParamSpec = ParamSpec {
    name: "ttl",
    default: "3",
    help: "lease length (PX) in ticks",
};

/// The `cycles` parameter as most models declare it.
pub(crate) const CYCLES: ParamSpec = ParamSpec {
    name: "cycles",
    default: "1",
    help: "acquisitions per client",
};

/// The `time_bound` parameter as most models declare it.
pub(crate) const TIME_BOUND: ParamSpec = ParamSpec {
    name: "time_bound",
    default: "8",
    help: "true time stops at this tick",
};

/// The `pauses` parameter as most models declare it.
pub(crate) const PAUSES: ParamSpec = ParamSpec {
    name: "pauses",
    default: "1",
    help: "how many stop-the-world pauses of a holder may happen",
};

/// The `clients` parameter as most models declare it.
pub(crate) const CLIENTS: ParamSpec = ParamSpec {
    name: "clients",
    default: "2",
    help: "number of clients (1-3)",
};

/// The parameters of one run: the model's table plus the values given.
pub(crate) struct Params<'a> {
    model: &'static str,
    specs: &'static [ParamSpec],
    given: &'a [(String, String)],
}

impl<'a> Params<'a> {
    pub(crate) fn new(
        model: &'static str,
        specs: &'static [ParamSpec],
        given: &'a [(String, String)],
    ) -> Result<Self, ModelError> {
        for (k, _) in given {
            if !specs.iter().any(|s| s.name == k) {
                return Err(ModelError::UnknownParam {
                    model: model.to_string(),
                    name: k.clone(),
                    valid: specs.iter().map(|s| s.name.to_string()).collect(),
                });
            }
        }
        Ok(Params {
            model,
            specs,
            given,
        })
    }

    fn raw(&self, name: &str) -> &str {
        if let Some((_, v)) = self.given.iter().rev().find(|(k, _)| k == name) {
            return v;
        }
        self.specs
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("model {} reads undeclared param {name}", self.model))
            .default
    }

    fn bad(&self, name: &str, expected: String) -> ModelError {
        ModelError::BadParam {
            model: self.model.to_string(),
            name: name.to_string(),
            value: self.raw(name).to_string(),
            expected,
        }
    }

    /// An integer in `lo..=hi`.
    pub(crate) fn int(&self, name: &str, lo: u8, hi: u8) -> Result<u8, ModelError> {
        match self.raw(name).trim().parse::<u8>() {
            Ok(v) if (lo..=hi).contains(&v) => Ok(v),
            _ => Err(self.bad(name, format!("an integer from {lo} to {hi}"))),
        }
    }

    /// `true`/`false` (also `1`/`0`, `yes`/`no`, `on`/`off`).
    pub(crate) fn bool(&self, name: &str) -> Result<bool, ModelError> {
        match self.raw(name).trim() {
            "true" | "1" | "yes" | "on" => Ok(true),
            "false" | "0" | "no" | "off" => Ok(false),
            _ => Err(self.bad(name, "true or false".to_string())),
        }
    }

    /// One of a fixed set of words; returns its index in `choices`.
    pub(crate) fn choice(&self, name: &str, choices: &[&str]) -> Result<usize, ModelError> {
        let v = self.raw(name).trim();
        choices
            .iter()
            .position(|c| *c == v)
            .ok_or_else(|| self.bad(name, format!("one of: {}", choices.join(", "))))
    }

    /// `clients`: from 1 to `max`, the size of the model's client array.
    pub(crate) fn clients(&self, max: usize) -> Result<u8, ModelError> {
        self.int("clients", 1, max as u8)
    }

    /// `ttl`: a lease of 1 to 50 ticks.
    pub(crate) fn ttl(&self) -> Result<u8, ModelError> {
        self.int("ttl", 1, 50)
    }

    /// `time_bound`: true time stops at a tick from 0 to 100.
    pub(crate) fn time_bound(&self) -> Result<u8, ModelError> {
        self.int("time_bound", 0, 100)
    }

    /// `tick_ms`: 1 to 250 simulated milliseconds per tick.
    pub(crate) fn tick_ms(&self) -> Result<u64, ModelError> {
        Ok(self.int("tick_ms", 1, 250)? as u64)
    }

    /// Every parameter with the value in force, in table order.
    pub(crate) fn effective(&self) -> Vec<(String, String)> {
        self.specs
            .iter()
            .map(|s| (s.name.to_string(), self.raw(s.name).trim().to_string()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPECS: &[ParamSpec] = &[
        ParamSpec {
            name: "ttl",
            default: "3",
            help: "",
        },
        ParamSpec {
            name: "fencing",
            default: "false",
            help: "",
        },
    ];

    #[test]
    fn defaults_overrides_and_errors() {
        let given = vec![("ttl".to_string(), "5".to_string())];
        let p = Params::new("m", SPECS, &given).unwrap();
        assert_eq!(p.int("ttl", 1, 9).unwrap(), 5);
        assert!(!p.bool("fencing").unwrap());
        assert!(p.int("ttl", 6, 9).is_err());

        let given = vec![("tll".to_string(), "5".to_string())];
        let err = Params::new("m", SPECS, &given).err().unwrap().to_string();
        assert!(err.contains("tll") && err.contains("ttl, fencing"), "{err}");
    }
}
