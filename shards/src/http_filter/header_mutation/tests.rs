//! The cases Envoy 1.40 answered on the same three-level route tables
//! (recorded side by side, 2026-11-27): a route, its virtual host and its
//! table each add `x-m` (values `route`, `vh`, `rc`), with one action.

use super::*;
use engine::access_log::LogFormat;
use engine::{HeaderToAdd, RouteHeaders};

fn add(name: &str, value: &str, action: AppendAction) -> HeaderToAdd {
    let value = match value.contains('%') {
        true => HeaderValue::Format(Box::new(LogFormat::text(value).unwrap())),
        false => HeaderValue::Literal(value.as_bytes().into()),
    };
    HeaderToAdd {
        name: name.as_bytes().into(),
        value,
        action,
        keep_empty: false,
    }
}

fn level(adds: Vec<HeaderToAdd>, remove: &[&str]) -> HeaderMutation {
    HeaderMutation {
        remove: remove.iter().map(|n| n.as_bytes().into()).collect(),
        add: adds,
    }
}

/// The three levels adding `x-m` with `action`, folded as a route's.
fn three(action: AppendAction, most_specific: bool) -> Vec<HeaderMutation> {
    let at = |v| {
        (
            level(vec![add("x-m", v, action)], &[]),
            HeaderMutation::default(),
        )
    };
    RouteHeaders::fold(at("route"), &at("vh"), &at("rc"), most_specific).request
}

fn input() -> FormatInput<'static> {
    FormatInput {
        peer: "10.0.0.1:5555".parse().unwrap(),
        upstream: None,
        protocol: "HTTP/1.1",
        status: None,
        sni: None,
    }
}

/// The `x-m` values of `client`'s head (its `x-m` fields) after `levels`.
fn x_m(levels: &[HeaderMutation], client: &[&str]) -> Vec<String> {
    let mut list = HeaderList::new();
    list.push(b":path", b"/p", false);
    for v in client {
        list.push(b"x-m", v.as_bytes(), false);
    }
    let mut edits = HeaderEdits::default();
    assert_eq!(apply(levels, Head::Request(&list), &mut edits, &input()), 0);
    let fields = list.iter().map(|(n, v, _)| (n, v));
    edits
        .apply(fields)
        .filter(|(n, _)| *n == b"x-m")
        .map(|(_, v)| String::from_utf8(v.to_vec()).unwrap())
        .collect()
}

#[test]
fn levels_apply_route_then_virtual_host_then_table() {
    use AppendAction::*;
    let cases: [(AppendAction, bool, &[&str], &[&str]); 12] = [
        (
            AppendIfExistsOrAdd,
            false,
            &["client"],
            &["client", "route", "vh", "rc"],
        ),
        (AppendIfExistsOrAdd, false, &[], &["route", "vh", "rc"]),
        (OverwriteIfExistsOrAdd, false, &["client"], &["rc"]),
        (AddIfAbsent, false, &["client"], &["client"]),
        (AddIfAbsent, false, &[], &["route"]),
        (OverwriteIfExists, false, &["client"], &["rc"]),
        (OverwriteIfExists, false, &[], &[]),
        // most_specific_header_mutations_wins: the table first.
        (
            AppendIfExistsOrAdd,
            true,
            &["client"],
            &["client", "rc", "vh", "route"],
        ),
        (OverwriteIfExistsOrAdd, true, &[], &["route"]),
        (AddIfAbsent, true, &[], &["rc"]),
        (OverwriteIfExists, true, &["client"], &["route"]),
        (OverwriteIfExists, true, &[], &[]),
    ];
    for (action, most_specific, client, want) in cases {
        assert_eq!(
            x_m(&three(action, most_specific), client),
            want,
            "{action:?} most_specific={most_specific} client={client:?}"
        );
    }
}

#[test]
fn each_level_removes_before_the_next_adds() {
    let empty = HeaderMutation::default;
    let fold = |route: HeaderMutation, vh: HeaderMutation, rc: HeaderMutation, ms: bool| {
        RouteHeaders::fold((route, empty()), &(vh, empty()), &(rc, empty()), ms).request
    };
    let adds = |v| level(vec![add("x-m", v, AppendAction::AppendIfExistsOrAdd)], &[]);
    let removes = || level(vec![], &["x-m"]);
    // The route removes, its virtual host adds after.
    assert_eq!(
        x_m(&fold(removes(), adds("vh"), empty(), false), &["client"]),
        ["vh"]
    );
    // The route adds, its virtual host removes after: nothing.
    assert!(x_m(&fold(adds("route"), removes(), empty(), false), &["client"]).is_empty());
    // One level removes, then adds.
    let both = level(
        vec![add("x-m", "route", AppendAction::AppendIfExistsOrAdd)],
        &["x-m"],
    );
    assert_eq!(
        x_m(&fold(both, empty(), empty(), false), &["client"]),
        ["route"]
    );
    // The table removes last: nothing left.
    assert!(x_m(
        &fold(adds("route"), adds("vh"), removes(), false),
        &["client"]
    )
    .is_empty());
    // most_specific: the table's removal first, the route's addition last.
    assert_eq!(
        x_m(&fold(adds("route"), removes(), empty(), true), &["client"]),
        ["route"]
    );
    assert!(x_m(&fold(removes(), adds("vh"), empty(), true), &["client"]).is_empty());
}

#[test]
fn additions_are_judged_against_the_head_the_level_found() {
    // Two ADD_IF_ABSENT entries for a missing name in one level: both go.
    let l = level(
        vec![
            add("x-m", "a", AppendAction::AddIfAbsent),
            add("x-m", "b", AppendAction::AddIfAbsent),
        ],
        &[],
    );
    assert_eq!(x_m(&[l], &[]), ["a", "b"]);
    // Overwrites go before appends, whatever their order in the list.
    let l = level(
        vec![
            add("x-m", "appended", AppendAction::AppendIfExistsOrAdd),
            add("x-m", "over", AppendAction::OverwriteIfExistsOrAdd),
        ],
        &[],
    );
    assert_eq!(x_m(&[l], &["client"]), ["over", "appended"]);
}

#[test]
fn formatted_values_and_empty_ones() {
    let mut absent = add(
        "x-m",
        "%REQ(x-absent)%",
        AppendAction::OverwriteIfExistsOrAdd,
    );
    // An entry that formats to nothing is skipped: the client's stays.
    assert_eq!(
        x_m(&[level(vec![absent.clone()], &[])], &["client"]),
        ["client"]
    );
    absent.keep_empty = true;
    assert_eq!(x_m(&[level(vec![absent], &[])], &["client"]), [""]);
    let f = add(
        "x-m",
        "%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT% %REQ(:path)% 100%%",
        AppendAction::AppendIfExistsOrAdd,
    );
    assert_eq!(x_m(&[level(vec![f], &[])], &[]), ["10.0.0.1 /p 100%"]);
}

#[test]
fn a_formatted_value_that_cannot_go_on_a_head_is_refused_and_counted() {
    let mut list = HeaderList::new();
    list.push(b"x-in", b"a\rb", false);
    let l = level(
        vec![add(
            "x-out",
            "%REQ(x-in)%",
            AppendAction::AppendIfExistsOrAdd,
        )],
        &[],
    );
    let mut edits = HeaderEdits::default();
    assert_eq!(apply(&[l], Head::Request(&list), &mut edits, &input()), 1);
    assert!(edits.is_empty());
}

#[test]
fn response_formats_read_the_request_as_it_came_and_the_response() {
    let mut req = HeaderList::new();
    req.push(b"user-agent", b"curl", false);
    let mut resp = HeaderList::new();
    resp.push(b"x-backend", b"b1", false);
    let l = level(
        vec![add(
            "x-echo",
            "%REQ(user-agent)% %RESP(x-backend)% %UPSTREAM_HOST% %RESPONSE_CODE%",
            AppendAction::AppendIfExistsOrAdd,
        )],
        &[],
    );
    let mut edits = HeaderEdits::default();
    let input = FormatInput {
        upstream: Some("127.0.0.1:8080".parse().unwrap()),
        status: Some(200),
        ..input()
    };
    let head = Head::Response {
        list: Some(&resp),
        request: Some(&req),
    };
    assert_eq!(apply(&[l], head, &mut edits, &input), 0);
    assert_eq!(
        edits.get(b"x-echo", None),
        Some(&b"curl b1 127.0.0.1:8080 200"[..])
    );
}
