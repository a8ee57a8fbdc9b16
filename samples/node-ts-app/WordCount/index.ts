// Counts the words of documents/{name} (a blob input), stores the counts in
// wordcounts/{name}.json (a blob output) and returns them.
import { AzureFunction, Context, HttpRequest } from "@azure/functions";

interface WordCounts {
    blob: string;
    words: number;
    top: [string, number][];
}

function countWords(text: string): Map<string, number> {
    const counts = new Map<string, number>();
    for (const word of text.toLowerCase().split(/\s+/).filter(Boolean)) {
        counts.set(word, (counts.get(word) ?? 0) + 1);
    }
    return counts;
}

const wordCount: AzureFunction = async function (context: Context, req: HttpRequest): Promise<void> {
    const document: Buffer | null | undefined = context.bindings.document;
    const blob = `documents/${req.params.name}`;
    if (document === null || document === undefined) {
        context.res = { status: 404, body: `${blob} does not exist` };
        return;
    }
    const counts = countWords(document.toString("utf8"));
    const top = [...counts.entries()]
        .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))
        .slice(0, 5);
    let words = 0;
    for (const n of counts.values()) words += n;
    const body: WordCounts = { blob, words, top };
    context.bindings.counts = JSON.stringify(body);
    context.res = { headers: { "content-type": "application/json" }, body };
};

export default wordCount;
