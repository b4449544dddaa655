//! The plans of calls, run against a server whose tools act on their arguments
//! (`tests/servers/explore.py`): what each call sent, what came back, the phases, the retry of
//! rejected arguments, and the budgets.

mod common;

use common::{quick, run_child, spawn, Run};
use glassbox_mcp::{CallResult, Direction, Explore, Phase, SessionConfig, ToolRecord};
use serde_json::Value;
use std::time::Duration;

fn run(explore: Explore) -> Run {
    let cfg = SessionConfig { explore, ..quick() };
    run_child(spawn("explore.py", &[], &[]), &cfg)
}

fn tool<'a>(r: &'a Run, name: &str) -> &'a ToolRecord {
    r.summary.tools.iter().find(|t| t.name == name).unwrap()
}

/// The text of every tool result the server sent during `phase`.
fn answers_in(r: &Run, phase: &Phase) -> Vec<String> {
    r.hooks
        .entries()
        .iter()
        .filter(|e| e.dir == Direction::ServerToClient && &e.phase == phase)
        .filter_map(|e| {
            let msg: Value = serde_json::from_slice(e.raw.as_slice()).ok()?;
            msg["result"]["content"][0]["text"]
                .as_str()
                .map(str::to_string)
        })
        .collect()
}

#[test]
fn the_plan_reaches_the_branches_behind_a_boolean_an_enum_and_a_one_of() {
    let r = run(Explore::thorough());
    assert!(r.summary.completed, "{:?}", r.summary.failure);
    let copy = tool(&r, "copy");
    assert!(copy.calls.len() >= 2, "{:?}", copy.calls);
    let texts: Vec<String> = (1..=copy.calls.len() as u32)
        .flat_map(|k| answers_in(&r, &Phase::call("copy", k)))
        .collect();
    assert!(texts.contains(&"with secrets".to_string()), "{texts:?}");
    assert!(texts.contains(&"plain".to_string()), "{texts:?}");
    let flipped = copy
        .calls
        .iter()
        .find(|c| c.arguments["includeSecrets"] == Value::Bool(true))
        .expect("a call with the boolean flipped");
    assert_eq!(flipped.label, "includeSecrets=true");
    assert_eq!(
        answers_in(&r, &Phase::call("copy", flipped.k)),
        ["with secrets"],
        "the call's phase holds its own answer"
    );

    let config = tool(&r, "config");
    let actions: Vec<&Value> = config
        .calls
        .iter()
        .map(|c| &c.arguments["action"])
        .collect();
    assert!(actions.contains(&&Value::from("dump")), "{actions:?}");

    // Exactly one of the oneOf's options in each call: never both, never neither.
    let fetch = tool(&r, "fetch");
    for c in &fetch.calls {
        let has = |k: &str| c.arguments.get(k).is_some();
        assert!(has("url") != has("alexandria"), "{:?}", c.arguments);
        assert_eq!(c.result, CallResult::Ok, "{c:?}");
    }
    assert!(fetch
        .calls
        .iter()
        .any(|c| c.arguments.get("alexandria").is_some()));

    // The first call of each tool is the full set, as before plans; phases: `call:NAME`,
    // then `call:NAME#2`...
    let phases = r.hooks.phases();
    assert!(phases.contains(&Phase::Call("copy".into())));
    assert!(phases.contains(&Phase::Call("copy#2".into())));
    assert_eq!(copy.arguments.as_ref(), Some(&copy.calls[0].arguments));
    assert_eq!(copy.result, copy.calls[0].result);
}

#[test]
fn first_calls_come_first_and_quick_stays_within_four_a_tool() {
    let r = run(Explore::quick());
    assert!(r.summary.completed, "{:?}", r.summary.failure);
    let calls: Vec<Phase> = r
        .hooks
        .phases()
        .into_iter()
        .filter(|p| p.call_of().is_some())
        .collect();
    let tools = r.summary.tools.len();
    assert!(
        calls[..tools].iter().all(|p| p.call_of().unwrap().1 == 1),
        "every tool's first call before any second one: {calls:?}"
    );
    for t in &r.summary.tools {
        // `strict`'s last budgeted call may be retried once past the budget.
        assert!(t.calls.len() <= 5, "{}: {:?}", t.name, t.calls);
        let ks: Vec<u32> = t.calls.iter().map(|c| c.k).collect();
        assert_eq!(ks, (1..=t.calls.len() as u32).collect::<Vec<_>>());
    }
    assert!(r
        .summary
        .explore
        .as_deref()
        .unwrap()
        .starts_with("4 calls per tool"));
}

#[test]
fn rejected_arguments_are_tried_again_with_the_next_set() {
    let r = run(Explore::quick());
    let strict = tool(&r, "strict");
    assert_eq!(strict.calls[0].result, CallResult::RejectedArguments);
    assert!(strict.calls[0].error.as_deref().unwrap().contains("-32602"));
    assert_eq!(strict.calls[1].retry_of, Some(1), "{:?}", strict.calls);
    assert_eq!(strict.calls[1].result, CallResult::Ok);
    assert_ne!(strict.calls[1].arguments, strict.calls[0].arguments);
    assert_eq!(
        strict.result,
        CallResult::RejectedArguments,
        "the first call's"
    );
    let net = tool(&r, "net");
    assert_eq!(net.calls[0].result, CallResult::TransportFailure);
}

#[test]
fn an_id_an_earlier_answer_returned_is_given_to_a_tool_that_wants_it() {
    let r = run(Explore::quick());
    let get = tool(&r, "get_item");
    assert_eq!(
        get.calls[0].result,
        CallResult::ToolError,
        "{:?}",
        get.calls
    );
    let given = get
        .calls
        .iter()
        .find(|c| {
            c.label
                .starts_with("values earlier answers returned: item_id")
        })
        .unwrap_or_else(|| panic!("{:?}", get.calls));
    assert_eq!(given.arguments["item_id"], "it-42");
    assert_eq!(given.result, CallResult::Ok, "{:?}", get.calls);
}

#[test]
fn rejected_arguments_are_corrected_once_from_the_message() {
    let r = run(Explore::quick());
    let picky = tool(&r, "picky");
    assert_eq!(picky.calls[0].result, CallResult::RejectedArguments);
    let fixed = &picky.calls[1];
    assert_eq!(fixed.retry_of, Some(1), "{:?}", picky.calls);
    assert!(
        fixed
            .label
            .starts_with("corrected from the server's message: ")
            && fixed.label.contains("mode=\"fast\""),
        "{:?}",
        fixed.label
    );
    assert_eq!(fixed.result, CallResult::Ok, "{:?}", picky.calls);
    assert_eq!(fixed.arguments["mode"], "fast");
    // The plan goes on after it.
    assert!(picky.calls.len() > 2, "{:?}", picky.calls);
}

#[test]
fn single_is_one_call_a_tool_and_no_retry() {
    let r = run(Explore::single());
    assert!(r.summary.completed, "{:?}", r.summary.failure);
    for t in &r.summary.tools {
        assert_eq!(t.calls.len(), 1, "{}: {:?}", t.name, t.calls);
    }
    assert_eq!(tool(&r, "strict").result, CallResult::RejectedArguments);
}

#[test]
fn the_time_after_the_first_calls_is_bounded_and_a_cut_is_said() {
    let r = run(Explore {
        per_tool: 16,
        per_session: 1000,
        time: Duration::from_millis(1500),
    });
    assert!(r.summary.completed, "{:?}", r.summary.failure);
    let slow = tool(&r, "slow");
    assert_eq!(slow.calls[0].result, CallResult::Ok);
    let cut = slow.calls.last().unwrap();
    assert_eq!(cut.result, CallResult::Timeout, "{:?}", slow.calls);
    assert!(cut.error.as_deref().unwrap().starts_with("cut:"), "{cut:?}");

    let few = run(Explore {
        per_tool: 16,
        per_session: 10,
        time: Duration::from_secs(30),
    });
    let made: usize = few.summary.tools.iter().map(|t| t.calls.len()).sum();
    assert_eq!(made, 10, "9 first calls and one more");
    assert!(few.summary.exploration_cut.is_some());
}
