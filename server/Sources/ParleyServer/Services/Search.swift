import Foundation

// Message search (PROTOCOL.md §7.7): the words of a plain-text query, every one of which a
// message must hold (the last as a prefix), among the messages the user could list right
// now. The index is the database's (Stores/SearchQueries.swift); the words, the match
// expressions handed to it and the snippets are made here, by one rule for both backends.

/// Words of a text, the rule the indexes follow: a word is a run of letters and digits
/// (Unicode categories L* and N*, plus the combining diacritics U+0300–U+036F, so that a
/// decomposed "café" is one word). A word's terms are its folded form — lower case, without
/// the combining diacritics, Latin letters without their accents — split again where folding
/// left something that is no letter or digit. This is what SQLite's `unicode61
/// remove_diacritics 2` tokenizer does (it keeps the accents of Greek or Cyrillic letters:
/// "й" stays), and what the PostgreSQL normalizer of migration 9 copies (the few differences
/// are in docs/PROTOCOL.md §7.7).
enum SearchText {
    static func isWordScalar(_ s: Unicode.Scalar) -> Bool {
        if isCombiningDiacritic(s) { return true }
        switch s.properties.generalCategory {
        case .uppercaseLetter, .lowercaseLetter, .titlecaseLetter, .modifierLetter, .otherLetter,
             .decimalNumber, .letterNumber, .otherNumber:
            return true
        default:
            return false
        }
    }

    /// The words of `text` as ranges of its scalars, in order.
    static func wordRanges(_ text: String) -> [Range<String.UnicodeScalarView.Index>] {
        let scalars = text.unicodeScalars
        var ranges: [Range<String.UnicodeScalarView.Index>] = []
        var start: String.UnicodeScalarView.Index? = nil
        var i = scalars.startIndex
        while i < scalars.endIndex {
            if isWordScalar(scalars[i]) {
                if start == nil { start = i }
            } else if let s = start {
                ranges.append(s..<i)
                start = nil
            }
            i = scalars.index(after: i)
        }
        if let s = start { ranges.append(s..<scalars.endIndex) }
        return ranges
    }

    static func isCombiningDiacritic(_ s: Unicode.Scalar) -> Bool { (0x300...0x36F).contains(s.value) }

    /// Precomposed Latin letters, whose accents folding removes (Latin-1 Supplement to
    /// Latin Extended-B, Latin Extended Additional), as the SQLite tokenizer does.
    static func isLatinLetterWithAccents(_ s: Unicode.Scalar) -> Bool {
        (0xC0...0x24F).contains(s.value) || (0x1E00...0x1EFF).contains(s.value)
    }

    /// The terms of one word (usually one).
    static func terms(ofWord word: Substring.UnicodeScalarView) -> [String] {
        var folded = String.UnicodeScalarView()
        for s in String(String.UnicodeScalarView(word)).lowercased().unicodeScalars where !isCombiningDiacritic(s) {
            if isLatinLetterWithAccents(s) {
                folded.append(contentsOf: String(Character(s)).decomposedStringWithCanonicalMapping.unicodeScalars
                    .filter { !isCombiningDiacritic($0) })
            } else {
                folded.append(s)
            }
        }
        return folded.split(whereSeparator: { !isWordScalar($0) }).map { String(String.UnicodeScalarView($0)) }
    }

    /// The terms of a whole text, in order.
    static func terms(_ text: String) -> [String] {
        wordRanges(text).flatMap { terms(ofWord: text.unicodeScalars[$0]) }
    }

    /// The FTS5 MATCH expression: every term a quoted string (FTS5 syntax in the input is
    /// text inside quotes, never an operator), the last one a prefix; terms side by side AND.
    static func fts5Match(_ terms: [String]) -> String {
        terms.enumerated().map { n, t in
            "\"" + t.replacingOccurrences(of: "\"", with: "\"\"") + "\"" + (n == terms.count - 1 ? " *" : "")
        }.joined(separator: " ")
    }

    /// The `to_tsquery` text: every term a quoted lexeme, AND, the last one a prefix (`:*`).
    static func tsquery(_ terms: [String]) -> String {
        terms.enumerated().map { n, t in
            let quoted = t.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "'", with: "''")
            return "'" + quoted + "'" + (n == terms.count - 1 ? ":*" : "")
        }.joined(separator: " & ")
    }

    /// Whether a word of a text is one the query found: one of its terms is a query term,
    /// or starts with the last one.
    static func matches(_ wordTerms: [String], _ query: [String]) -> Bool {
        guard let last = query.last else { return false }
        let exact = Set(query.dropLast())
        return wordTerms.contains { exact.contains($0) || $0.hasPrefix(last) }
    }

    static let snippetWords = 64
    /// Words of context kept before the first match when the text is cut.
    static let snippetLead = 8

    /// A window of at most `snippetWords` words of `text` around its first matched word, "…"
    /// where it was cut, the matched words between the markers. Nil when no word matches.
    static func snippet(_ text: String, query: [String], start: String, end: String) -> String? {
        let words = wordRanges(text)
        let matched = words.map { matches(terms(ofWord: text.unicodeScalars[$0]), query) }
        guard let first = matched.firstIndex(of: true) else { return nil }
        var from = max(0, first - snippetLead)
        from = max(0, min(from, words.count - snippetWords))
        let to = min(words.count, from + snippetWords)
        let scalars = text.unicodeScalars
        var out = String.UnicodeScalarView()
        if from > 0 { out.append(contentsOf: "…".unicodeScalars) }
        var cursor = from == 0 ? scalars.startIndex : words[from].lowerBound
        for k in from..<to where matched[k] {
            out.append(contentsOf: scalars[cursor..<words[k].lowerBound])
            out.append(contentsOf: start.unicodeScalars)
            out.append(contentsOf: scalars[words[k]])
            out.append(contentsOf: end.unicodeScalars)
            cursor = words[k].upperBound
        }
        out.append(contentsOf: scalars[cursor..<(to == words.count ? scalars.endIndex : words[to - 1].upperBound)])
        if to < words.count { out.append(contentsOf: "…".unicodeScalars) }
        return String(out)
    }

    /// The snippet of a found message: from its text, else from its file's name (what the
    /// index holds of it); when neither matches by this rule (a tokenizer nuance of the
    /// backend), the start of the text unmarked.
    static func snippet(of m: MessageRecord, query: [String], start: String, end: String) -> String {
        if let s = snippet(m.message, query: query, start: start, end: end) { return s }
        if let name = m.file?.name, let s = snippet(name, query: query, start: start, end: end) { return s }
        let text = m.message.isEmpty ? (m.file?.name ?? "") : m.message
        let words = wordRanges(text)
        if words.count <= snippetWords { return text }
        return String(text.unicodeScalars[..<words[snippetWords - 1].upperBound]) + "…"
    }
}

/// What a search asks the storage for (Stores/SearchQueries.swift).
struct MessageSearch {
    enum Order: String { case ts, score }
    /// The folded terms; the last one is a prefix.
    var terms: [String]
    var userId: String
    var channelUrls: [String]?
    var customTypes: [String]?
    var senderIds: [String]?
    var from: Int64?
    var to: Int64?
    var order: Order
    /// The key of the last result of the previous page: (created_at, id) for `ts`,
    /// (score, created_at, id) for `score`.
    var after: [Int64]?
    var limit: Int
}

/// A found message with its score (relevance × 10⁶, rounded: integers page exactly).
struct SearchHit {
    var message: MessageRecord
    var score: Int64
}

enum Search {
    /// What the search service uses of a request (Services/Interfaces.swift).
    typealias Needs = UserRecords & MessageRecords & Rendering

    static let maxQueryLength = 1000
    static let maxMarkerLength = 16

    static func messages(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        let i = ctx.input
        // As the per-user routes: a session user searches as themselves, the admin names the user.
        let userId = try ctx.requiredActingUser()
        _ = try await s.user(userId)
        let raw = try i.requiredString("query")
        let query = raw.trimmingCharacters(in: .whitespacesAndNewlines)
        let length = query.unicodeScalars.count
        if length == 0 || length > maxQueryLength {
            throw APIError.invalid("query", "must be 1 to \(maxQueryLength) characters after trimming white space (it has \(length)).")
        }
        let order = MessageSearch.Order(rawValue: try i.enumValue("sort_field", ["ts", "score"], default: "ts"))!
        let limit = try i.limit(default: 20, max: 100)
        var after: [Int64]? = nil
        if let token = try i.string("token"), !token.isEmpty {
            // The key's shape is the order's: a token of the other order is no token here.
            guard let key = decodeToken(token), key.count == (order == .ts ? 2 : 3) else { throw APIError.badToken() }
            after = try key.map { value -> Int64 in
                guard case .int(let n) = value else { throw APIError.badToken() }
                return n
            }
        }
        func marker(_ name: String, _ value: String) throws -> String {
            let m = try i.string(name) ?? value
            if m.unicodeScalars.count > maxMarkerLength { throw APIError.invalid(name, "must be at most \(maxMarkerLength) characters.") }
            return m
        }
        let start = try marker("highlight_start", "<b>")
        let end = try marker("highlight_end", "</b>")
        let from = try i.int("message_ts_from")
        let to = try i.int("message_ts_to")
        func list(_ name: String) throws -> [String]? {
            guard let items = try i.stringList(name), !items.isEmpty else { return nil }
            return Array(Set(items)).sorted()
        }
        var view = try MessageView.parse(i)
        view.pollViewer = userId

        let terms = SearchText.terms(query)
        // A query of no words (punctuation only) finds nothing; it is no error.
        if terms.isEmpty { return .json(answer([], hasNext: false, next: "")) }
        let search = MessageSearch(terms: terms, userId: userId, channelUrls: try list("channel_urls"),
                                   customTypes: try list("custom_types"), senderIds: try list("sender_ids"),
                                   from: from, to: to, order: order, after: after, limit: limit + 1)
        var hits = try await s.searchMessages(search)
        let hasNext = hits.count > limit
        if hasNext { hits.removeLast(hits.count - limit) }
        var next = ""
        if hasNext, let last = hits.last {
            let key: [Int64] = order == .ts ? [last.message.createdAt, last.message.id]
                : [last.score, last.message.createdAt, last.message.id]
            next = encodeToken(key.map { .int($0) })
        }
        let rendered = try await s.render(hits.map(\.message), view)
        let results: [JSON] = zip(hits, rendered).map { hit, json in
            .obj([
                ("message", json),
                ("snippet", .string(SearchText.snippet(of: hit.message, query: terms, start: start, end: end))),
                ("score", .double(Double(hit.score) / 1_000_000)),
            ])
        }
        return .json(answer(results, hasNext: hasNext, next: next))
    }

    private static func answer(_ results: [JSON], hasNext: Bool, next: String) -> JSON {
        .obj([("results", .array(results)), ("has_next", .bool(hasNext)), ("next", .string(next))])
    }
}
