import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

import java.net.URI;

/** {@code java -cp ... HdfsPut hdfs://HOST:PORT LOCAL DEST}: copy a local file or directory to DEST. */
public final class HdfsPut {
    public static void main(String[] args) throws Exception {
        try (FileSystem fs = FileSystem.get(new URI(args[0]), new Configuration())) {
            Path dest = new Path(args[2]);
            fs.mkdirs(dest.getParent() == null ? dest : dest.getParent());
            fs.copyFromLocalFile(false, true, new Path("file://" + new java.io.File(args[1]).getAbsolutePath()), dest);
        }
    }
}
