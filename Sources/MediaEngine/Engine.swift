import CFFmpeg
import KilnCore
