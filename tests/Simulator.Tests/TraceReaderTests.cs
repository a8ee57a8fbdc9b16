using System.Text;
using FaaST.Simulator.Trace;
using ICSharpCode.SharpZipLib.BZip2;

namespace FaaST.Simulator.Tests;

/// <summary>The trace reader on hand-written text in the schema of the Azure Functions Blob Access Trace 2020.</summary>
public sealed class TraceReaderTests
{
    private const string Header = "Timestamp,AnonRegion,AnonUserId,AnonAppName,AnonFunctionInvocationId,AnonBlobName,BlobType,AnonBlobETag,BlobBytes,Read,Write";
    private const string Row1 = "1606092900138,6ex,775920313,9gti3olh,1565080819,jfvf7k9kwiiq7gdx,BlockBlob/application/octet-stream,kq2su6bhi0,30.0,True,False";
    private const string Row2 = "1606092900200,iic,1495523193,uf2u84b0,1302383289,tp783etybrgxap8x,BlockBlob/,6mreka6qhr,36.4,False,True";
    private const string Row3 = "1606092900300,6ex,775920313,9gti3olh,1565080820,jfvf7k9kwiiq7gdx,BlockBlob/,kq2su6bhi1,2204780.0,true,TRUE";

    private static readonly TraceAccess Access1 = new(1606092900138, "6ex/775920313/9gti3olh", "1565080819", "jfvf7k9kwiiq7gdx", "kq2su6bhi0", 30, true, false);
    private static readonly TraceAccess Access2 = new(1606092900200, "iic/1495523193/uf2u84b0", "1302383289", "tp783etybrgxap8x", "6mreka6qhr", 36, false, true);
    private static readonly TraceAccess Access3 = new(1606092900300, "6ex/775920313/9gti3olh", "1565080820", "jfvf7k9kwiiq7gdx", "kq2su6bhi1", 2204780, true, true);

    private static (List<TraceAccess> Rows, List<TraceProblem> Problems) ReadText(string text, string name = "trace.csv")
    {
        var problems = new List<TraceProblem>();
        var rows = TraceReader.Read(new StringReader(text), name, problems.Add).ToList();
        return (rows, problems);
    }

    private static string Lines(params string[] lines) => string.Join('\n', lines) + "\n";

    [Fact]
    public void Every_field_of_a_row_is_read_and_the_app_joins_region_user_and_app_name()
    {
        var (rows, problems) = ReadText(Lines(Header, Row1, Row2, Row3));
        Assert.Empty(problems);
        Assert.Equal([Access1, Access2, Access3], rows);
        Assert.Same(rows[0].App, rows[2].App);
    }

    [Fact]
    public void Crlf_line_ends_a_byte_order_mark_blank_lines_and_a_missing_last_line_break_are_accepted()
    {
        var (rows, problems) = ReadText("\uFEFF" + Header + "\r\n" + Row1 + "\r\n\r\n" + Row2 + "\r\n" + Row3);
        Assert.Empty(problems);
        Assert.Equal([Access1, Access2, Access3], rows);
    }

    [Fact]
    public void Quoted_fields_with_commas_and_doubled_quotes_are_unescaped()
    {
        var quoted = "\"1606092900138\",6ex,775920313,\"9gti,3olh\",1565080819,\"blob \"\"a\"\"\",\"BlockBlob/x,y\",kq2su6bhi0,\"30.0\",True,False";
        var (rows, problems) = ReadText(Lines(Header, quoted, Row2));
        Assert.Empty(problems);
        Assert.Equal([Access1 with { App = "6ex/775920313/9gti,3olh", Blob = "blob \"a\"" }, Access2], rows);
    }

    [Fact]
    public void Columns_are_found_by_name_in_any_order_and_an_extra_column_is_ignored()
    {
        var text = Lines(
            "Write,Read,BlobBytes,AnonBlobETag,Extra,AnonBlobName,AnonFunctionInvocationId,AnonAppName,AnonUserId,AnonRegion,Timestamp",
            "False,True,30.0,kq2su6bhi0,whatever,jfvf7k9kwiiq7gdx,1565080819,9gti3olh,775920313,6ex,1606092900138");
        var (rows, problems) = ReadText(text);
        Assert.Empty(problems);
        Assert.Equal([Access1], rows);
    }

    [Theory]
    [InlineData("1606092900138,6ex,775920313,9gti3olh,1565080819,jfvf7k9kwiiq7gdx,BlockBlob/,kq2su6bhi0,30.0,True", "has 10 fields, the header has 11")]
    [InlineData("16060929oo138,6ex,775920313,9gti3olh,1565080819,jfvf7k9kwiiq7gdx,BlockBlob/,kq2su6bhi0,30.0,True,False", "Timestamp '16060929oo138' is not an integer")]
    [InlineData("1606092900138.5,6ex,775920313,9gti3olh,1565080819,jfvf7k9kwiiq7gdx,BlockBlob/,kq2su6bhi0,30.0,True,False", "Timestamp '1606092900138.5' is not an integer")]
    [InlineData("1606092900138,6ex,775920313,9gti3olh,1565080819,jfvf7k9kwiiq7gdx,BlockBlob/,kq2su6bhi0,3o.0,True,False", "BlobBytes '3o.0' is not a number")]
    [InlineData("1606092900138,6ex,775920313,9gti3olh,1565080819,jfvf7k9kwiiq7gdx,BlockBlob/,kq2su6bhi0,NaN,True,False", "BlobBytes 'NaN' is not a number")]
    [InlineData("1606092900138,6ex,775920313,9gti3olh,1565080819,jfvf7k9kwiiq7gdx,BlockBlob/,kq2su6bhi0,-3.0,True,False", "BlobBytes '-3.0' is negative")]
    [InlineData("1606092900138,6ex,775920313,9gti3olh,1565080819,jfvf7k9kwiiq7gdx,BlockBlob/,kq2su6bhi0,30.0,yes,False", "Read 'yes' is neither True nor False")]
    [InlineData("1606092900138,6ex,775920313,9gti3olh,1565080819,jfvf7k9kwiiq7gdx,BlockBlob/,kq2su6bhi0,30.0,True,", "Write '' is neither True nor False")]
    [InlineData("1606092900138,6ex,775920313,9gti3olh,1565080819,jfvf7k9kwiiq7gdx,BlockBlob/,kq2su6bhi0,30.0,False,False", "neither Read nor Write is True")]
    [InlineData("1606092900138,6ex,775920313,,1565080819,jfvf7k9kwiiq7gdx,BlockBlob/,kq2su6bhi0,30.0,True,False", "AnonAppName is empty")]
    [InlineData("1606092900138,6ex,775920313,9gti3olh,1565080819,,BlockBlob/,kq2su6bhi0,30.0,True,False", "AnonBlobName is empty")]
    [InlineData("1606092900138,6ex,775920313,\"9gti3olh,1565080819,jfvf7k9kwiiq7gdx,BlockBlob/,kq2su6bhi0,30.0,True,False", "a quoted field is not closed")]
    [InlineData("1606092900138,6ex,775920313,\"9gti\"3olh,1565080819,jfvf7k9kwiiq7gdx,BlockBlob/,kq2su6bhi0,30.0,True,False", "a quoted field is not closed")]
    public void A_malformed_line_is_reported_with_its_number_and_reason_and_skipped_while_the_rows_around_it_are_read(string bad, string reason)
    {
        var (rows, problems) = ReadText(Lines(Header, Row1, bad, Row2), "day1.csv");
        Assert.Equal([Access1, Access2], rows);
        var problem = Assert.Single(problems);
        Assert.Equal("day1.csv", problem.File);
        Assert.Equal(3, problem.Line);
        Assert.Contains(reason, problem.Reason, StringComparison.Ordinal);
    }

    [Fact]
    public void Line_numbers_count_blank_lines_and_every_bad_line_is_reported()
    {
        var bad = Row1.Replace("30.0", "-1.0", StringComparison.Ordinal);
        var (rows, problems) = ReadText(Lines(Header, bad, "", Row2, bad, Row3));
        Assert.Equal([Access2, Access3], rows);
        Assert.Equal([2L, 5L], problems.Select(p => p.Line));
    }

    [Fact]
    public void A_trace_without_a_header_throws_naming_the_file_and_the_columns_it_needs()
    {
        var e = Assert.Throws<TraceFormatException>(() => ReadText(Lines(Row1, Row2), "day2.csv"));
        Assert.Equal("day2.csv", e.File);
        Assert.Contains("has no header", e.Message, StringComparison.Ordinal);
        Assert.Contains("AnonFunctionInvocationId", e.Message, StringComparison.Ordinal);
        var empty = Assert.Throws<TraceFormatException>(() => ReadText("", "empty.csv"));
        Assert.Contains("empty.csv: is empty", empty.Message, StringComparison.Ordinal);
    }

    [Fact]
    public void A_header_missing_required_columns_throws_naming_each_missing_column()
    {
        var header = Header.Replace(",AnonBlobETag", "", StringComparison.Ordinal).Replace(",Write", "", StringComparison.Ordinal);
        var e = Assert.Throws<TraceFormatException>(() => ReadText(Lines(header, Row1), "day3.csv"));
        Assert.Equal(1, e.Line);
        Assert.Contains("day3.csv:1: the header lacks the columns AnonBlobETag, Write", e.Message, StringComparison.Ordinal);
    }

    [Fact]
    public void A_missing_file_throws_at_once_naming_the_path()
    {
        var path = Path.Combine(Path.GetTempPath(), "no-such-trace-" + Guid.NewGuid().ToString("N") + ".csv");
        var e = Assert.Throws<FileNotFoundException>(() => TraceReader.Read(path, _ => { }));
        Assert.Equal(path, e.FileName);
        Assert.Contains(path, e.Message, StringComparison.Ordinal);
    }

    [Fact]
    public void A_line_longer_than_the_read_buffer_is_read_whole()
    {
        var longBlob = new string('b', 200_000);
        var (rows, problems) = ReadText(Lines(Header, Row1, Row1.Replace("jfvf7k9kwiiq7gdx", longBlob, StringComparison.Ordinal), Row2));
        Assert.Empty(problems);
        Assert.Equal([Access1, Access1 with { Blob = longBlob }, Access2], rows);
    }

    [Fact]
    public void A_directory_without_trace_files_throws_naming_it()
    {
        using var dir = new TempDirectory("trace-none-");
        File.WriteAllText(Path.Combine(dir.Path, "notes.txt"), "not a trace");
        var e = Assert.Throws<FileNotFoundException>(() => TraceReader.Read(dir.Path, _ => { }));
        Assert.Equal(dir.Path, e.FileName);
        Assert.Contains("no *.csv or *.csv.bz2", e.Message, StringComparison.Ordinal);
    }

    [Fact]
    public void A_bzip2_file_written_with_SharpZipLib_reads_back_the_same_rows_as_the_plain_file()
    {
        using var dir = new TempDirectory("trace-bz2-");
        var text = Lines([Header, .. Enumerable.Range(0, 5000).Select(i => Row1.Replace("1565080819", (1565080819 + i).ToString(), StringComparison.Ordinal)), Row2]);
        var plain = Path.Combine(dir.Path, "trace.csv");
        File.WriteAllText(plain, text);
        var compressed = Path.Combine(dir.Path, "trace.csv.bz2");
        WriteBzip2(compressed, text);

        var problems = new List<TraceProblem>();
        var fromPlain = TraceReader.Read(plain, problems.Add).ToList();
        var fromBzip2 = TraceReader.Read(compressed, problems.Add).ToList();
        Assert.Empty(problems);
        Assert.Equal(5001, fromPlain.Count);
        Assert.Equal(fromPlain, fromBzip2);
        Assert.Equal(Access2, fromBzip2[^1]);
    }

    [Fact]
    public void A_directory_reads_its_trace_files_in_name_order_and_ignores_other_files()
    {
        using var dir = new TempDirectory("trace-dir-");
        File.WriteAllText(Path.Combine(dir.Path, "day2.csv"), Lines(Header, Row3));
        WriteBzip2(Path.Combine(dir.Path, "day1.csv.bz2"), Lines(Header, Row1, Row2));
        File.WriteAllText(Path.Combine(dir.Path, "notes.txt"), "not a trace");
        var problems = new List<TraceProblem>();
        Assert.Equal([Access1, Access2, Access3], TraceReader.Read(dir.Path, problems.Add).ToList());
        Assert.Empty(problems);
    }

    [Fact]
    public void A_truncated_bzip2_file_throws_naming_the_file_and_the_line_reached()
    {
        using var dir = new TempDirectory("trace-cut-");
        var path = Path.Combine(dir.Path, "cut.csv.bz2");
        var rows = Enumerable.Range(0, 20000).Select(i => Row1.Replace("1565080819", (1565080819 + i * 7919L).ToString(), StringComparison.Ordinal));
        WriteBzip2(path, Lines([Header, .. rows]));
        var bytes = File.ReadAllBytes(path);
        File.WriteAllBytes(path, bytes[..(bytes.Length / 2)]);

        var read = 0;
        var e = Assert.Throws<TraceFormatException>(() =>
        {
            foreach (var _ in TraceReader.Read(path, p => Assert.Fail($"unexpected problem {p}")))
            {
                read++;
            }
        });
        Assert.Equal(path, e.File);
        Assert.True(e.Line > read, $"the line reached ({e.Line}) should be past the {read} rows read");
        Assert.Contains("truncated or corrupt", e.Message, StringComparison.Ordinal);
    }

    [Fact]
    public void A_plain_file_named_bz2_throws_saying_it_is_not_bzip2()
    {
        using var dir = new TempDirectory("trace-notbz2-");
        var path = Path.Combine(dir.Path, "plain.csv.bz2");
        File.WriteAllText(path, Lines(Header, Row1));
        var e = Assert.Throws<TraceFormatException>(() => TraceReader.Read(path, _ => { }).ToList());
        Assert.Equal(path, e.File);
        Assert.Contains("bzip2", e.Message, StringComparison.Ordinal);
    }

    private static void WriteBzip2(string path, string text)
    {
        using var file = File.Create(path);
        using var bzip2 = new BZip2OutputStream(file);
        bzip2.Write(Encoding.UTF8.GetBytes(text));
    }
}
